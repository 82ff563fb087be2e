//! `cargo xtask bench`: instruction counts per token on QEMU boards under `-icount shift=0`, for
//! each kernel set and 1 or 4 cores; a markdown table and an SVG bar chart under `results/`.

use crate::{
    board, build_kernel, card_image, cargo, ensure_model, qemu_command, run_quiet, table_head,
    workspace_root, Board, QemuOpts, Settings,
};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

/// One configuration to measure.
#[derive(Debug, Clone)]
pub struct Case {
    pub board: &'static str,
    pub cpu: &'static str,
    pub kernels: &'static str,
    /// 1, or N measured on one core (QEMU's instruction counter is global across vCPUs).
    pub cores: usize,
}

/// What one run printed.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub per_prompt_token: u64,
    /// The busiest core's count per prompt token (N-core cases).
    pub prompt_critical_path: Option<u64>,
    /// Bytes read from the card per prompt token.
    pub bytes_per_prompt_token: Option<u64>,
    pub per_generated_token: u64,
    pub critical_path: Option<u64>,
    pub per_core: Vec<u64>,
    pub prompt_tokens: usize,
    pub text: String,
}

/// llama.cpp on the default model and prompt, `n` tokens, for each of
/// [`crate::llamacpp::DEFAULT_BUILDS`] (the aarch64 ones and rv64gcv at VLEN 256; measured once,
/// then read from the cache): the build, its figures and the QEMU command.
fn llama_default(
    n: usize,
) -> Result<Vec<(crate::llamacpp::Build, crate::llamacpp::Figures, String)>, String> {
    let model = ensure_model()?;
    crate::llamacpp::DEFAULT_BUILDS
        .iter()
        .map(|&b| crate::llamacpp::measure(b, &model, n).map(|(f, cmd)| (b, f, cmd)))
        .collect()
}

/// Where the llama.cpp figures come from, and the commands that produced them.
fn llama_note(runs: &[(crate::llamacpp::Build, crate::llamacpp::Figures, String)]) -> String {
    let mut s = format!(
        "\nllama.cpp {} (`llama-simple`, static, one thread; see `results/models.md` or \
         `xtask/src/llamacpp.rs` for how it is built and counted), measured with (`$LMBOOT_CACHE`: the cache directory, `~/.cache/lmboot` unless set):\n\n",
        crate::llamacpp::version().unwrap_or_else(|e| e)
    );
    for (_, _, cmd) in runs {
        let _ = writeln!(s, "    {cmd}");
    }
    s
}

fn num_after(line: &str, key: &str) -> Option<u64> {
    let i = line.find(key)? + key.len();
    line[i..]
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())?
        .parse()
        .ok()
}

/// Write `results/{stem}.md`, and `results/{stem}.svg` if there is a chart.
pub(crate) fn write_results(stem: &str, md: &str, svg: Option<&str>) -> Result<(), String> {
    let dir = workspace_root().join("results");
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    fs::write(dir.join(format!("{stem}.md")), md).map_err(|e| e.to_string())?;
    if let Some(svg) = svg {
        fs::write(dir.join(format!("{stem}.svg")), svg).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Boot `kernel` on `b` with the card `img` in QEMU (stdin closed); the UART text with CRLF as LF.
/// An unsuccessful exit is an error naming `what`, with the exit status and the UART text.
pub(crate) fn boot_uart(
    b: &Board,
    kernel: &Path,
    img: &Path,
    opts: &QemuOpts,
    what: &str,
) -> Result<String, String> {
    let out = qemu_command(b, kernel, img, opts)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("QEMU: {e}"))?;
    let uart = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    if !out.status.success() {
        return Err(format!("{what}: exit {:?}\n{uart}", out.status.code()));
    }
    Ok(uart)
}

/// Boot `case` with the default model and prompt; parse the stats.
pub fn measure(case: &Case, n: usize) -> Result<Figures, String> {
    let settings = Settings {
        prompt: "Once upon a time".into(),
        n,
        ..Default::default()
    };
    measure_with(case, settings, None)
}

/// Boot `case` with `settings` (its kernel set and core split filled in) and `-m mem`; parse the
/// stats.
pub fn measure_with(case: &Case, settings: Settings, mem: Option<&str>) -> Result<Figures, String> {
    measure_model(case, settings, mem, &ensure_model()?)
}

/// [`measure_with`] on the GGUF at `model`.
pub fn measure_model(
    case: &Case,
    settings: Settings,
    mem: Option<&str>,
    model: &Path,
) -> Result<Figures, String> {
    let b = board(case.board)?;
    let kernel = build_kernel(&b, true)?;
    // Machines with a fixed core count (raspi2b: always 4) keep their cores, and the kernel uses
    // one of them (`cores = 1`): the others wait in WFE, which QEMU's counter barely sees.
    let fixed_cores = b.smp.is_none();
    let settings = Settings {
        kernels: case.kernels.into(),
        measure_cores: (case.cores > 1).then_some(case.cores),
        cores: if fixed_cores { Some(1) } else { settings.cores },
        ..settings
    };
    let img = workspace_root()
        .join("target")
        .join(format!("bench-{}.img", case.board));
    card_image(&b, Some(&kernel), &settings, model, &img)?;
    let opts = QemuOpts {
        smp: (!fixed_cores).then_some(1),
        cpu: Some(case.cpu.into()),
        icount: true,
        mem: mem.map(Into::into),
        ..Default::default()
    };
    let what = format!("{} {} {}", case.board, case.cpu, case.kernels);
    let uart = boot_uart(&b, &kernel, &img, &opts, &what)?;
    let mut f = Figures::default();
    for line in uart.lines() {
        if let Some(rest) = line.strip_prefix("prompt: ") {
            f.prompt_tokens = num_after(rest, "").unwrap_or(0) as usize;
        }
        if line.starts_with("stats: instructions:") {
            f.per_prompt_token = num_after(line, "(").unwrap_or(0);
            f.per_generated_token = num_after(line, "generation ").unwrap_or(0);
        }
        if line.contains("cores: prompt critical path") {
            f.prompt_critical_path = num_after(line, "prompt critical path ");
        }
        if line.starts_with("stats: heap high-water") {
            f.bytes_per_prompt_token = line
                .split("bytes read ")
                .nth(1)
                .and_then(|r| num_after(r, "("));
        }
        if line.contains("cores: critical path") {
            f.critical_path = num_after(line, "critical path ");
            if let Some(l) = line.split('[').nth(1) {
                f.per_core = l
                    .trim_end_matches(']')
                    .split(", ")
                    .filter_map(|v| v.parse().ok())
                    .collect();
            }
        }
    }
    if let (Some(s), Some(e)) = (uart.find("--- output ---\n"), uart.find("\n--- end ---")) {
        f.text = uart[s + 15..e].to_string();
    }
    if f.per_generated_token == 0 {
        return Err(format!("no instruction counts in the output:\n{uart}"));
    }
    Ok(f)
}

fn m(v: u64) -> String {
    format!("{:.1} M", v as f64 / 1e6)
}

/// Run every case, write `results/bench.md` and `results/bench.svg`, return the markdown.
pub fn run(cases: &[Case], n: usize) -> Result<String, String> {
    let mut rows = vec![];
    for c in cases {
        eprintln!(
            "xtask: bench {} {} {} cores={}",
            c.board, c.cpu, c.kernels, c.cores
        );
        match measure(c, n) {
            Ok(f) => rows.push((c.clone(), Some(f))),
            Err(e) if e.contains("not available on this CPU") => rows.push((c.clone(), None)),
            Err(e) => return Err(e),
        }
    }
    let mut md = String::new();
    let _ = writeln!(md, "# lmboot instruction counts (QEMU -icount shift=0, SmolLM2-135M Q4_1, \"Once upon a time\", greedy, {n} tokens)\n");
    table_head(&mut md, "| board | cpu | kernels | cores | per prompt token | per generated token | busiest core (critical path) per generated token | vs 1 core |");
    let one_core = |c: &Case| {
        rows.iter()
            .find(|(r, f)| {
                r.board == c.board
                    && r.cpu == c.cpu
                    && r.kernels == c.kernels
                    && r.cores == 1
                    && f.is_some()
            })
            .and_then(|(_, f)| f.clone())
    };
    for (c, f) in &rows {
        match f {
            None => {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | n/a | n/a | n/a | |",
                    c.board, c.cpu, c.kernels, c.cores
                );
            }
            Some(f) => {
                let (busiest, ratio) = match (f.critical_path, one_core(c)) {
                    (Some(cp), Some(one)) => (
                        m(cp),
                        format!("{:.0}%", cp as f64 * 100.0 / one.per_generated_token as f64),
                    ),
                    _ => (m(f.per_generated_token), "100%".into()),
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} | {busiest} | {ratio} |",
                    c.board,
                    c.cpu,
                    c.kernels,
                    c.cores,
                    m(f.per_prompt_token),
                    m(f.per_generated_token)
                );
            }
        }
    }
    let llama = llama_default(n)?;
    for (b, f, _) in &llama {
        let _ = writeln!(
            md,
            "| {} | {} | | 1 | {} | {} | | |",
            crate::llamacpp::label(*b),
            b.cpu,
            m(f.per_prompt_token),
            m(f.per_generated_token)
        );
    }
    let _ = writeln!(
        md,
        "\n4-core rows run the 4-way split on one core and count each core's share of every parallel job \
         (QEMU's instruction counter is global across vCPUs); the busiest-core figure is the critical path: \
         the serial work plus, for each job, its largest share."
    );
    // Bar chart of instructions per generated token (critical path for the multi-core rows).
    let mut bars: Vec<(String, u64)> = rows
        .iter()
        .filter_map(|(c, f)| {
            let cpu = c
                .cpu
                .trim_start_matches("cortex-")
                .replace("rv64,v=true,", "rv64 ")
                .replace(",elen=64", "");
            f.as_ref().map(|f| {
                (
                    format!("{cpu} {} x{}", c.kernels, c.cores),
                    f.critical_path.unwrap_or(f.per_generated_token),
                )
            })
        })
        .collect();
    bars.extend(
        llama
            .iter()
            .map(|(b, f, _)| (crate::llamacpp::label(*b), f.per_generated_token)),
    );
    let svg = bar_chart(&bars);
    md.push_str(&llama_note(&llama));
    write_results("bench", &md, Some(&svg))?;
    Ok(md)
}

/// The SVG bar chart of `bars` (label, instructions per generated token), llama.cpp's grey, with
/// a line naming llama.cpp's version below them.
fn bar_chart(bars: &[(String, u64)]) -> String {
    let max = bars.iter().map(|b| b.1).max().unwrap_or(1) as f64;
    let (w, bh) = (760.0, 26.0);
    // Room below the bars for the line naming llama.cpp's version.
    let h = 80.0 + bars.len() as f64 * (bh + 8.0);
    let mut svg = format!("<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='13'>\n<rect width='100%' height='100%' fill='white'/>\n<text x='10' y='22' font-size='15'>Instructions per generated token (millions; multi-core: busiest core)</text>\n");
    for (i, (label, v)) in bars.iter().enumerate() {
        let y = 40.0 + i as f64 * (bh + 8.0);
        let len = (*v as f64 / max) * (w - 330.0);
        let color = if label.starts_with("llama.cpp") {
            "#999999"
        } else {
            "#2b6cb0"
        };
        let _ = writeln!(svg, "<text x='10' y='{:.0}'>{label}</text><rect x='230' y='{y:.0}' width='{len:.0}' height='{bh}' fill='{color}'/><text x='{:.0}' y='{:.0}'>{:.1}</text>", y + 18.0, 236.0 + len, y + 18.0, *v as f64 / 1e6);
    }
    let _ = writeln!(
        svg,
        "<text x='10' y='{:.0}' fill='#555555'>llama.cpp {}</text>",
        h - 14.0,
        crate::llamacpp::version().unwrap_or_else(|e| e)
    );
    svg.push_str("</svg>\n");
    svg
}

/// The default matrix: virt aarch64 (scalar / NEON on a Cortex-A53, NEON+dotprod on a Cortex-A76),
/// virt riscv64 (scalar, RVV at VLEN 128 and 256) and the 32-bit Raspberry Pi 2 (Cortex-A7, scalar
/// and AArch32 NEON), 1 and 4 cores.
pub fn default_cases() -> Vec<Case> {
    let mut v = vec![];
    let configs = [
        ("qemu-virt-aarch64", "cortex-a53", "scalar"),
        ("qemu-virt-aarch64", "cortex-a53", "neon"),
        ("qemu-virt-aarch64", "cortex-a76", "neon-dotprod"),
        (
            "qemu-virt-riscv64",
            "rv64,v=true,vlen=256,elen=64",
            "scalar",
        ),
        ("qemu-virt-riscv64", "rv64,v=true,vlen=128,elen=64", "rvv"),
        ("qemu-virt-riscv64", "rv64,v=true,vlen=256,elen=64", "rvv"),
        ("rpi2", "cortex-a7", "scalar"),
        ("rpi2", "cortex-a7", "neon"),
    ];
    for (board, cpu, kernels) in configs {
        for cores in [1, 4] {
            v.push(Case {
                board,
                cpu,
                kernels,
                cores,
            });
        }
    }
    v
}

/// A prompt of 40 tokens on the default model (batches of 1, 8 and 32 are all exercised).
pub const BATCH_PROMPT: &str = "The history of computing is a story of machines that became smaller, cheaper and more capable, until a computer fit on a card the size of a stick of gum and cost less than a meal.";

/// Instructions per prompt token with the prompt in batches of 1, 8 and 32, for every kernel set
/// on 1 and 4 cores (4: the busiest core), against the same set's count per generated token;
/// then the bytes read from the card per prompt token with 64 MiB of RAM, batches of 1 and 32.
/// Writes `results/batches.md`.
pub fn batches(n: usize) -> Result<String, String> {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Prompt batches (QEMU -icount shift=0, SmolLM2-135M Q4_1, a {}-byte prompt, greedy)\n",
        BATCH_PROMPT.len()
    );
    table_head(&mut md, "| kernels | cpu | cores | prompt tokens | B = 1 | B = 8 | B = 32 | per generated token | B = 32 / generated | llama.cpp per prompt token |");
    let llama = llama_default(n)?;
    // Scalar once (the aarch64 build): the RISC-V scalar build runs the same Rust.
    let sets = default_cases()
        .into_iter()
        .filter(|c| c.kernels != "scalar" || c.board == "qemu-virt-aarch64")
        // The card-bytes part runs with 64 MiB of RAM, which fixed-RAM machines cannot take.
        .filter(|c| c.board.starts_with("qemu-virt"))
        .collect::<Vec<_>>();
    for c in &sets {
        let mut per = vec![];
        let mut generated = 0;
        let mut tokens = 0;
        for b in [1usize, 8, 32] {
            eprintln!(
                "xtask: bench batches {} {} cores={} batch={b}",
                c.cpu, c.kernels, c.cores
            );
            let settings = Settings {
                prompt: BATCH_PROMPT.into(),
                n,
                extra: vec![("batch".into(), b.to_string())],
                ..Default::default()
            };
            let f = match measure_with(c, settings, None) {
                Ok(f) => f,
                Err(e) if e.contains("not available on this CPU") => break,
                Err(e) => return Err(e),
            };
            tokens = f.prompt_tokens;
            let busiest =
                |x: Option<u64>, all: u64| if c.cores > 1 { x.unwrap_or(all) } else { all };
            per.push(busiest(f.prompt_critical_path, f.per_prompt_token));
            if b == 1 {
                generated = busiest(f.critical_path, f.per_generated_token);
            }
        }
        if per.len() < 3 {
            continue;
        }
        let _ = writeln!(
            md,
            "| {} | {} | {} | {tokens} | {} | {} | {} | {} | {:.2} | {} |",
            c.kernels,
            c.cpu,
            c.cores,
            m(per[0]),
            m(per[1]),
            m(per[2]),
            m(generated),
            per[2] as f64 / generated.max(1) as f64,
            llama
                .iter()
                .find(|(b, _, _)| b.kernels == c.kernels && b.cpu == c.cpu && c.cores == 1)
                .map_or("–".into(), |(_, f, _)| m(f.per_prompt_token))
        );
    }
    let _ = writeln!(
        md,
        "\n4-core rows: the busiest core's share (the 4-way split run on one core). llama.cpp: its \
         count per prompt token of the {}-token prompt \"{}\" in one batch on one core (armv8-a build \
         for NEON, armv8.2-a+dotprod for SDOT, rv64gcv for RVV at VLEN 256).\n{}",
        llama.first().map_or(0, |(_, f, _)| f.prompt_tokens),
        crate::llamacpp::PROMPT,
        llama_note(&llama)
    );
    let _ = writeln!(
        md,
        "| -m 64M, virt aarch64, NEON | B = 1 | B = 32 |\n|---|---|---|"
    );
    let mut bytes = vec![];
    for b in [1usize, 32] {
        let settings = Settings {
            prompt: BATCH_PROMPT.into(),
            n: 2,
            extra: vec![("batch".into(), b.to_string())],
            ..Default::default()
        };
        let neon = sets
            .iter()
            .find(|c| c.kernels == "neon")
            .ok_or("no NEON case")?;
        let f = measure_with(neon, settings, Some("64M"))?;
        bytes.push(f.bytes_per_prompt_token.unwrap_or(0));
    }
    let _ = writeln!(
        md,
        "| bytes read from the card per prompt token | {:.1} MB | {:.2} MB |",
        bytes[0] as f64 / 1e6,
        bytes[1] as f64 / 1e6
    );
    write_results("batches", &md, None)?;
    Ok(md)
}

/// The models besides the default that `--only models` measures, with the RAM each board gets
/// (enough to hold the model: these rows count compute, not streaming).
pub const BENCH_MODELS: [(&str, &str); 2] =
    [("gemma-3-270m", "512M"), ("qwen2.5-coder-0.5b", "1G")];

/// Instructions per prompt and per generated token of each of [`BENCH_MODELS`] for NEON (Cortex-A53),
/// NEON+SDOT (Cortex-A76) and RVV at VLEN 256, on 1 and 4 cores (4: the busiest core and its share
/// of the 1-core count); then llama.cpp beside the 1-core NEON and NEON+SDOT rows
/// ([`crate::llamacpp`]). Writes `results/models.md`.
pub fn models(n: usize) -> Result<String, String> {
    let mut md = String::new();
    let _ = writeln!(md, "# Instructions per token of other models (QEMU -icount shift=0, \"Once upon a time\", greedy, {n} tokens)\n");
    table_head(&mut md, "| model | kernels | cpu | cores | per prompt token | per generated token | busiest core / 1 core |");
    let sets: Vec<Case> = default_cases()
        .into_iter()
        // Machines with a fixed RAM size (raspi2b) cannot take the models' RAM sizes.
        .filter(|c| c.kernels != "scalar" && !c.cpu.contains("vlen=128"))
        .filter(|c| c.board.starts_with("qemu-virt"))
        .collect();
    let mut ours = vec![];
    for (name, mem) in BENCH_MODELS {
        let model = crate::ensure_named_model(name)?;
        let mut one_core = 0;
        for c in &sets {
            let Some(f) = measure_bench_model(name, &model, mem, c, n)? else {
                continue;
            };
            let (prompt, generated) = if c.cores > 1 {
                (
                    f.prompt_critical_path.unwrap_or(f.per_prompt_token),
                    f.critical_path.unwrap_or(f.per_generated_token),
                )
            } else {
                one_core = f.per_generated_token;
                ours.push((name, c.kernels, f.clone()));
                (f.per_prompt_token, f.per_generated_token)
            };
            let share = generated as f64 * 100.0 / one_core.max(1) as f64;
            let _ = writeln!(
                md,
                "| {name} | {} | {} | {} | {} | {} | {share:.1}% |",
                c.kernels,
                c.cpu,
                c.cores,
                m(prompt),
                m(generated)
            );
        }
    }
    md.push_str(&beside_llama_cpp(&ours, n)?);
    write_results("models", &md, None)?;
    Ok(md)
}

/// lmboot's figures for `c` on the model `name` at `model` with `mem` of RAM; `None` where the
/// kernel set is not available on the CPU.
fn measure_bench_model(
    name: &str,
    model: &Path,
    mem: &str,
    c: &Case,
    n: usize,
) -> Result<Option<Figures>, String> {
    eprintln!(
        "xtask: bench models {name} {} {} cores={}",
        c.cpu, c.kernels, c.cores
    );
    let settings = Settings {
        prompt: crate::llamacpp::PROMPT.into(),
        n,
        ..Default::default()
    };
    match measure_model(c, settings, Some(mem), model) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.contains("not available on this CPU") => Ok(None),
        Err(e) => Err(e),
    }
}

/// `--only llamacpp`: lmboot on one core beside llama.cpp for the default model and
/// [`BENCH_MODELS`] on the Cortex-A53 (NEON) and Cortex-A76 (NEON+SDOT), and for the default
/// model on rv64 at VLEN 256 (RVV), without the rest of `--only models`. Writes
/// `results/llamacpp.md`.
pub fn llama_cpp(n: usize) -> Result<String, String> {
    use crate::llamacpp::{Isa, BUILDS, DEFAULT_BUILDS};
    let mut ours = vec![];
    let models = std::iter::once((crate::DEFAULT.name, "512M")).chain(BENCH_MODELS);
    for (name, mem) in models {
        let model = crate::ensure_named_model(name)?;
        let builds: &[_] = if name == crate::DEFAULT.name {
            &DEFAULT_BUILDS
        } else {
            &BUILDS
        };
        for b in builds {
            let c = Case {
                board: match b.isa {
                    Isa::Aarch64 => "qemu-virt-aarch64",
                    Isa::Riscv64 => "qemu-virt-riscv64",
                },
                cpu: b.cpu,
                kernels: b.kernels,
                cores: 1,
            };
            if let Some(f) = measure_bench_model(name, &model, mem, &c, n)? {
                ours.push((name, b.kernels, f));
            }
        }
    }
    let md = format!(
        "# lmboot beside llama.cpp (QEMU -icount shift=0, \"Once upon a time\", greedy, {n} tokens)\n{}",
        beside_llama_cpp(&ours, n)?
    );
    write_results("llamacpp", &md, None)?;
    Ok(md)
}

/// The markdown section of llama.cpp beside lmboot's 1-core `ours` (model, kernel set, figures):
/// llama.cpp measured (or read from the cache) for each model and build, the ratio per generated
/// token, both texts, and the commands and version that produced the figures.
fn beside_llama_cpp(ours: &[(&str, &str, Figures)], n: usize) -> Result<String, String> {
    use crate::llamacpp::{cmake_args, kernel_package, measure, version, Isa, BUILDS, RVV};
    let mut md = String::new();
    let mut texts = String::new();
    let mut commands = vec![];
    let mut riscv = false;
    let _ = writeln!(md, "\n## Beside llama.cpp, one core\n");
    table_head(&mut md, "| model | cpu | lmboot kernels | llama.cpp -march | prompt tokens (lmboot / llama.cpp) | lmboot per prompt token | llama.cpp per prompt token | lmboot per generated token | llama.cpp per generated token | lmboot / llama.cpp per generated token |");
    let mut names: Vec<&str> = ours.iter().map(|o| o.0).collect();
    names.dedup();
    for name in names {
        let model = crate::ensure_named_model(name)?;
        // llama.cpp's rv64gcv build runs the default model only.
        let rvv = (name == crate::DEFAULT.name).then_some(RVV);
        for b in BUILDS.into_iter().chain(rvv) {
            let Some((_, _, f)) = ours.iter().find(|(m, k, _)| *m == name && *k == b.kernels)
            else {
                continue;
            };
            let (l, cmd) = measure(b, &model, n)?;
            riscv |= b.isa == Isa::Riscv64;
            let file = model.file_name().map(|f| f.to_string_lossy().into_owned());
            commands.push(format!(
                "# {name}, {}: {}\n    {cmd}",
                b.cpu,
                file.unwrap_or_default()
            ));
            let _ = writeln!(
                md,
                "| {name} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {:.2} |",
                b.cpu,
                b.kernels,
                b.arch,
                f.prompt_tokens,
                l.prompt_tokens,
                m(f.per_prompt_token),
                m(l.per_prompt_token),
                m(f.per_generated_token),
                m(l.per_generated_token),
                f.per_generated_token as f64 / l.per_generated_token.max(1) as f64
            );
            let _ = writeln!(
                texts,
                "- {name}, {}: lmboot {:?}, llama.cpp {:?}",
                b.cpu,
                f.text.trim(),
                l.text.trim()
            );
        }
    }
    let _ = writeln!(md, "\nllama.cpp {}: `llama-simple` (one thread, no mmap: `examples/simple/simple.cpp` patched, as it takes neither from its command line), built static for aarch64 Linux with Debian's cross compiler (`cmake -S vendor/llama.cpp -B build-ARCH {}`, `cmake --build build-ARCH --target llama-simple`), run as the init of Debian's arm64 Linux {} {} on the same QEMU board, CPU model and counter as lmboot. Under `-icount shift=0` the guest clock advances 1 ns per instruction, so llama.cpp's own perf lines (`prompt eval time = X ms / N tokens`, `eval time = Y ms / M runs`) are instructions: X / N per prompt token, Y / M per generated token (its {} generated tokens after the first, as lmboot's). They include the guest kernel's work meanwhile (timer ticks at 250 Hz, about 0.2% of a 60 M-instruction loop timed the same way; the page faults of the first touches of its buffers) and llama.cpp's graph building and scheduling for each pass, not its sampler (timed apart; lmboot's count per generated token includes its greedy pick). Each side tokenizes the prompt itself (the counts are in the table). On the Cortex-A76 build llama.cpp repacks the Q4_K and Q4_0 weights it can into its interleaved SDOT layout (`CPU_REPACK`), as it does by default on such a CPU.\n", version()?, cmake_args(BUILDS[0]).join(" ").replace(BUILDS[0].arch, "ARCH"), crate::dtb::PACKAGE, crate::dtb::VERSION, n.saturating_sub(1));
    if riscv {
        let (package, kversion, suite, _, _) = kernel_package(Isa::Riscv64);
        let _ = writeln!(md, "The rv64gcv build (the default model only) is the same for riscv64 Linux, compiled by Debian's clang 19 against the riscv64 cross toolchain's libraries (bookworm's riscv64 cross gcc 12 has no RVV intrinsics; C assembled by its GNU assembler, which takes the inline RVV assembly of ggml's `arch/riscv/quants.c`): `cmake -S vendor/llama.cpp -B build-rv64gcv {}`. It runs as the init of Debian {suite}'s riscv64 Linux {package} {kversion} (bookworm has no riscv64 port) on QEMU's riscv64 virt board with `-cpu {} -bios default`, the CPU model of lmboot's RVV row at VLEN 256. That guest's clock runs ahead of its instructions for about 1.3 s after init starts (a 60 M-instruction loop reads up to 225 M until about 2.1 s of guest time, then 60.07 M); the model's load spans it, and a run that first waits until 4 s reads the same prompt and eval times to 0.01%.\n", cmake_args(RVV).join(" "), RVV.cpu);
    }
    let _ = writeln!(md, "Texts (greedy, {n} tokens):\n\n{texts}");
    let _ = writeln!(md, "Commands (`cargo xtask bench --only models` or `--only llamacpp`; the initramfs holds `/llama-simple` and the model as `/model.gguf`; `$LMBOOT_CACHE` is the cache directory, `~/.cache/lmboot` unless set):\n");
    for c in commands {
        let _ = writeln!(md, "    {c}");
    }
    Ok(md)
}

/// Only the cases of `board` (or all with `None`).
pub fn cases_for(board: Option<&str>) -> Vec<Case> {
    default_cases()
        .into_iter()
        .filter(|c| board.is_none_or(|b| c.board == b))
        .collect()
}

/// One line of `lmboot-host --cache-sweep`: (MiB, configuration, bytes per token).
fn sweep_line(line: &str) -> Option<(u64, String, u64)> {
    let rest = line.strip_prefix("cache-sweep: ")?;
    let (mib, rest) = rest.split_once(" MiB ")?;
    let (name, rest) = rest.split_once(": ")?;
    let bytes = rest.split(' ').next()?.parse().ok()?;
    Some((mib.parse().ok()?, name.to_string(), bytes))
}

/// Bytes read per generated token against cache size, for the resident-prefix policy (read-ahead
/// off and on) and LRU, through the runtime's page cache on the host (the same forward pass and
/// access order as a board). Writes `results/pagecache.md` and `results/pagecache.svg`.
pub fn cache_sweep(n: usize) -> Result<String, String> {
    let model = ensure_model()?;
    let host = crate::build_host()?;
    let model_bytes = fs::metadata(&model).map_err(|e| e.to_string())?.len();
    let sizes = "8,16,24,32,40,48,56,64,72,80,88,96";
    eprintln!("xtask: bench: page-cache sweep over {sizes} MiB");
    let out = std::process::Command::new(&host)
        .arg("--model")
        .arg(&model)
        .args(["--cache-sweep", sizes, "-n", &n.max(2).to_string()])
        .output()
        .map_err(|e| format!("lmboot-host: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "lmboot-host --cache-sweep failed:\n{text}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let points: Vec<(u64, String, u64)> = text.lines().filter_map(sweep_line).collect();
    let names: Vec<String> = {
        let mut v: Vec<String> = points.iter().map(|p| p.1.clone()).collect();
        v.dedup();
        v.sort();
        v.dedup();
        v
    };
    let mibs: Vec<u64> = {
        let mut v: Vec<u64> = points.iter().map(|p| p.0).collect();
        v.dedup();
        v
    };
    let sweep = Sweep {
        model_bytes,
        names,
        mibs,
        points,
    };
    let md = sweep.table();
    write_results("pagecache", &md, Some(&sweep.chart()))?;
    Ok(md)
}

/// One line of the sweep's chart: its name, colour and points (MiB, MB per token).
type Series<'a> = (String, &'a str, Vec<(f64, f64)>);

/// The points of a page-cache sweep: (MiB, policy, bytes per token).
struct Sweep {
    model_bytes: u64,
    names: Vec<String>,
    mibs: Vec<u64>,
    points: Vec<(u64, String, u64)>,
}

impl Sweep {
    fn get(&self, mib: u64, name: &str) -> Option<u64> {
        self.points
            .iter()
            .find(|p| p.0 == mib && p.1 == name)
            .map(|p| p.2)
    }

    /// The markdown table.
    fn table(&self) -> String {
        let Sweep {
            model_bytes,
            names,
            mibs,
            ..
        } = self;
        let get = |mib, name: &str| self.get(mib, name);
        let mut md = String::new();
        let _ = writeln!(md, "# Bytes read from the card per generated token (SmolLM2-135M Q4_1, {model_bytes} bytes; page 256 KiB; greedy, \"Once upon a time\")\n");
        let _ = writeln!(md, "| cache | M - C | {} |", names.join(" | "));
        let _ = writeln!(md, "|---|---|{}", "---|".repeat(names.len()));
        for &mib in mibs {
            let mc = model_bytes.saturating_sub(mib << 20);
            let cells: Vec<String> = names
                .iter()
                .map(|n| get(mib, n).map_or("".into(), |b| format!("{:.1} MB", b as f64 / 1e6)))
                .collect();
            let _ = writeln!(
                md,
                "| {mib} MiB | {:.1} MB | {} |",
                mc as f64 / 1e6,
                cells.join(" | ")
            );
        }
        let _ = writeln!(md, "\nRead-ahead adds its pages to the streaming window, so it pins 1 MiB less than the plain policy (about 1 MB more per token); it changes when the bytes are read, not how many.");
        md
    }

    /// The SVG line plot: x = cache size, y = MB per token.
    fn chart(&self) -> String {
        let Sweep {
            model_bytes,
            names,
            mibs,
            ..
        } = self;
        let model_bytes = *model_bytes;
        let get = |mib, name: &str| self.get(mib, name);
        let (w, h, l, b, t, r) = (720.0, 420.0, 70.0, 50.0, 40.0, 200.0);
        let xmax = *mibs.iter().max().unwrap_or(&1) as f64;
        let ymax = (model_bytes as f64 / 1e6 * 1.1).max(1.0);
        let x = |mib: f64| l + (w - l - r) * mib / xmax;
        let y = |mb: f64| h - b - (h - b - t) * mb / ymax;
        let mut svg = format!("<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n<text x='{l}' y='22' font-size='14'>Bytes read per generated token vs page-cache size ({:.0} MB model)</text>\n", model_bytes as f64 / 1e6);
        let _ = writeln!(svg, "<line x1='{l}' y1='{}' x2='{}' y2='{}' stroke='black'/><line x1='{l}' y1='{t}' x2='{l}' y2='{}' stroke='black'/>", h - b, w - r, h - b, h - b);
        for i in 0..=4 {
            let mb = ymax * i as f64 / 4.0;
            let _ = writeln!(
                svg,
                "<text x='{}' y='{:.0}' text-anchor='end'>{mb:.0} MB</text>",
                l - 6.0,
                y(mb) + 4.0
            );
        }
        for &mib in mibs {
            let _ = writeln!(
                svg,
                "<text x='{:.0}' y='{}' text-anchor='middle'>{mib}</text>",
                x(mib as f64),
                h - b + 16.0
            );
        }
        let _ = writeln!(
            svg,
            "<text x='{:.0}' y='{}' text-anchor='middle'>cache size (MiB)</text>",
            (l + w - r) / 2.0,
            h - 10.0
        );
        let mut series: Vec<Series<'_>> = names
            .iter()
            .map(|n| {
                let color = match n.as_str() {
                    "lru" => "#c53030",
                    "resident-prefix" => "#2b6cb0",
                    _ => "#38a169",
                };
                (
                    n.clone(),
                    color,
                    mibs.iter()
                        .filter_map(|&m| get(m, n).map(|v| (m as f64, v as f64 / 1e6)))
                        .collect(),
                )
            })
            .collect();
        series.push((
            "M - C".into(),
            "#999999",
            mibs.iter()
                .map(|&m| (m as f64, model_bytes.saturating_sub(m << 20) as f64 / 1e6))
                .collect(),
        ));
        for (i, (name, color, pts)) in series.iter().enumerate() {
            let path: Vec<String> = pts
                .iter()
                .map(|(a, v)| format!("{:.1},{:.1}", x(*a), y(*v)))
                .collect();
            let dash = if name == "M - C" {
                " stroke-dasharray='4 3'"
            } else {
                ""
            };
            let _ = writeln!(
                svg,
                "<polyline fill='none' stroke='{color}' stroke-width='2'{dash} points='{}'/>",
                path.join(" ")
            );
            let ly = t + 20.0 + i as f64 * 20.0;
            let _ = writeln!(svg, "<line x1='{}' y1='{ly}' x2='{}' y2='{ly}' stroke='{color}' stroke-width='2'{dash}/><text x='{}' y='{}'>{name}</text>", w - r + 10.0, w - r + 34.0, w - r + 40.0, ly + 4.0);
        }
        svg.push_str("</svg>\n");
        svg
    }
}

/// Guest time per generated token with read-ahead off and on: QEMU virt aarch64 with 64 MiB of
/// RAM (the model streams), `-icount shift=0` (guest time follows instructions, 1 ns each), the
/// card as fast as the host's file and throttled to an SD card's 25 MB/s. Writes
/// `results/readahead.md`.
pub fn readahead(n: usize) -> Result<String, String> {
    let b = board("qemu-virt-aarch64")?;
    let kernel = build_kernel(&b, true)?;
    let model = ensure_model()?;
    let mut md = String::new();
    let _ = writeln!(md, "# Read-ahead: guest time per generated token (virt aarch64, 4 cores, -m 64M, -icount shift=0, {n} tokens)\n");
    table_head(
        &mut md,
        "| card | read-ahead | ms/token (guest) | I/O stall ms/token | bytes read/token | text |",
    );
    for (card, opts) in [
        ("unthrottled", ""),
        ("25 MB/s (QEMU throttle)", ",throttling.bps-read=25000000"),
    ] {
        for ra in ["0", "4"] {
            let settings = Settings {
                n,
                extra: vec![("readahead".into(), ra.into())],
                ..Default::default()
            };
            let img = workspace_root()
                .join("target")
                .join(format!("bench-readahead-{ra}.img"));
            card_image(&b, Some(&kernel), &settings, &model, &img)?;
            let q = QemuOpts {
                mem: Some("64M".into()),
                icount: true,
                drive_opts: opts.into(),
                ..Default::default()
            };
            eprintln!("xtask: bench: read-ahead {ra}, card {card}");
            let uart = boot_uart(&b, &kernel, &img, &q, &format!("read-ahead {ra}"))?;
            let gen = uart
                .lines()
                .find(|l| l.starts_with("stats: prompt"))
                .unwrap_or("");
            let cache = uart
                .lines()
                .find(|l| l.starts_with("stats: heap"))
                .unwrap_or("");
            let ms = num_after(gen, "ms (").unwrap_or(0);
            let stall = num_after(cache, "generated token after the first), refills")
                .and(cache.rsplit_once("I/O stall "))
                .and_then(|(_, s)| num_after(s, "("));
            let per = num_after(cache, "bytes read ")
                .and_then(|_| cache.split_once(" ("))
                .and_then(|(_, s)| s.split(' ').next()?.parse::<u64>().ok())
                .unwrap_or(0);
            let text = uart
                .find("--- output ---\n")
                .and_then(|s| uart[s + 15..].split_once("\n--- end ---"))
                .map(|(t, _)| t.trim().to_string())
                .unwrap_or_default();
            let _ = writeln!(
                md,
                "| {card} | {} | {ms} | {} | {:.1} MB | {text:?} |",
                if ra == "0" { "off" } else { "4 pages" },
                stall.map_or("?".into(), |s| s.to_string()),
                per as f64 / 1e6
            );
        }
    }
    let _ = writeln!(md, "\nUnder -icount the guest clock advances with instructions, and waiting cores spin, so a read the cores wait for costs guest time while one that completes during computation does not. The throttle runs on the host's clock, so 25 MB/s is the host-time rate, not the rate the guest measures.");
    write_results("readahead", &md, None)?;
    Ok(md)
}

/// `--only card`: the SD bus per host and mode from the register-level simulators (the
/// `card_bench` test: bus time per 256 KiB page, register accesses per MB), the driver's
/// instructions per MB by data path (callgrind over `card_bench`), and QEMU raspi3b's PIO
/// instructions per MB under `-icount`. Writes `results/card.md`.
pub fn card() -> Result<String, String> {
    let sim = workspace_root().join("target").join("card-sim.md");
    let mut c = Command::new(card_bench_binary()?);
    c.args(["--ignored", "--exact", "card_bus_time_per_page"])
        .env("LMBOOT_CARD_BENCH", &sim);
    run_quiet(c, "the card bus benchmark (card_bench)")?;
    let mut md = fs::read_to_string(&sim).map_err(|e| format!("{}: {e}", sim.display()))?;
    md.push_str(&card_instructions()?);
    write_results("card", &md, None)?;
    Ok(md)
}

/// The CPU's instructions per MB read, by data path: the `card_bench` binary's `cpu_*` runs
/// (64 pages of 256 KiB) under valgrind's callgrind, counting only inside `cpu_reads` and not
/// inside the simulators (their register, clock and memory hooks toggle the count off): the
/// driver's own instructions on this machine's x86-64 build (Debian's `valgrind`, installed on
/// first use). Register accesses are counted apart (the simulator table above). Also the
/// programmed I/O of QEMU's raspi3b under `-icount`: real AArch64 instructions while loading.
fn card_instructions() -> Result<String, String> {
    ensure_valgrind()?;
    let bin = card_bench_binary()?;
    let mut md = String::new();
    let _ = writeln!(md, "\n## The driver's instructions per MB read (callgrind, x86-64 build, simulators excluded)\n");
    table_head(
        &mut md,
        "| host | data path | driver instructions / MB | vs PIO |",
    );
    let mb = (64 * 256 * 1024) as f64 / 1e6;
    let mut pio = 0.0;
    let (mut arasan_pio, mut sdhost_dma) = (0.0, 0.0);
    for (test, host, path) in [
        (
            "cpu_arasan_high_speed_pio",
            "Pi 2 / 3 / Zero 2 W (Arasan EMMC), High Speed",
            "PIO",
        ),
        (
            "cpu_sdhost_pio",
            "Pi 2 / 3 / Zero 2 W (sdhost), High Speed",
            "PIO",
        ),
        (
            "cpu_sdhost_dma",
            "Pi 2 / 3 / Zero 2 W (sdhost), High Speed",
            "DMA (system DMA engine), queued",
        ),
        ("cpu_emmc2_pio", "Pi 4 (EMMC2), DDR50", "PIO"),
        ("cpu_emmc2_adma2", "Pi 4 (EMMC2), DDR50", "ADMA2, queued"),
        ("cpu_sunxi_pio", "Orange Pi (H3), High Speed", "PIO"),
        (
            "cpu_sunxi_idma",
            "Orange Pi (H3), High Speed",
            "IDMAC, queued",
        ),
    ] {
        eprintln!("xtask: bench: card, {test} under callgrind");
        let out_file = workspace_root()
            .join("target")
            .join(format!("callgrind.{test}"));
        let mut c = Command::new("valgrind");
        c.arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", out_file.display()))
            .arg("--collect-atstart=no");
        for f in [
            "*cpu_reads*",
            "*SimRegs*",
            "*SimClock*",
            "*SimDmaOf*",
            "*Counters*",
        ] {
            c.arg(format!("--toggle-collect={f}"));
        }
        c.arg(&bin).args(["--ignored", "--exact", test]);
        let out = c.output().map_err(|e| format!("valgrind: {e}"))?;
        let err = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("valgrind {test}: {err}"));
        }
        let n: f64 = err
            .lines()
            .find_map(|l| l.split("Collected : ").nth(1))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| format!("valgrind {test}: no count in\n{err}"))?;
        let per_mb = n / mb;
        if path == "PIO" {
            pio = per_mb;
        }
        if test == "cpu_arasan_high_speed_pio" {
            arasan_pio = per_mb;
        }
        if test == "cpu_sdhost_dma" {
            sdhost_dma = per_mb;
        }
        let _ = writeln!(
            md,
            "| {host} | {path} | {:.0} | 1/{:.1} |",
            per_mb,
            pio / per_mb
        );
    }
    let _ = writeln!(
        md,
        "\nsdhost with DMA against the Arasan's PIO (the Pi 2 / 3 / Zero 2 W's two data paths): 1/{:.1} of the instructions per MB (target: at most 1/20).",
        arasan_pio / sdhost_dma
    );
    let _ = writeln!(md, "\nNot counted: the cache maintenance a non-coherent DMA needs on the board, one `DC IVAC` per 64-byte line before and after each transfer (32,768 lines a MB, at least two instructions a line with the address arithmetic), nor the register accesses themselves (one load or store each on the board).");
    md.push_str(&qemu_pio_instructions()?);
    Ok(md)
}

/// Install Debian's valgrind if it is missing.
fn ensure_valgrind() -> Result<(), String> {
    if Command::new("valgrind").arg("--version").output().is_ok() {
        return Ok(());
    }
    let ok = Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends", "valgrind"])
        .status()
        .map_err(|e| e.to_string())?
        .success();
    ok.then_some(())
        .ok_or_else(|| "apt-get install valgrind failed".into())
}

/// Build `card_bench` (release) and return its executable.
fn card_bench_binary() -> Result<std::path::PathBuf, String> {
    let mut c = cargo();
    c.args([
        "test",
        "--release",
        "-p",
        "lmboot-tests",
        "--test",
        "card_bench",
        "--no-run",
        "--message-format=json",
    ]);
    let out = c.output().map_err(|e| e.to_string())?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"card_bench\"") && l.contains("\"executable\""))
        .find_map(|l| {
            let at = l.find("\"executable\":\"")? + 14;
            let end = l[at..].find('"')?;
            Some(std::path::PathBuf::from(&l[at..at + end]))
        })
        .ok_or_else(|| "card_bench: no test executable built".into())
}

/// AArch64 instructions per MB read on QEMU's raspi3b under `-icount` (the data path the card line names), loading
/// 16 MiB (`selftest = panic` stops right after: its non-zero exit is expected).
fn qemu_pio_instructions() -> Result<String, String> {
    let model = ensure_model()?;
    let b = board("rpi3")?;
    let kernel = build_kernel(&b, true)?;
    let settings = Settings {
        n: 1,
        cache: "16M".into(),
        selftest: Some("panic".into()),
        ..Default::default()
    };
    let img = workspace_root().join("target").join("bench-card-rpi3.img");
    card_image(&b, Some(&kernel), &settings, &model, &img)?;
    let q = QemuOpts {
        icount: true,
        ..Default::default()
    };
    eprintln!("xtask: bench: card, rpi3 under -icount");
    let out = qemu_command(&b, &kernel, &img, &q)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("QEMU: {e}"))?;
    let uart = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let line = |p: &str| {
        uart.lines()
            .find(|l| l.starts_with(p))
            .unwrap_or("")
            .to_string()
    };
    let (load, card) = (line("load: "), line("card: SD at"));
    if load.is_empty() {
        return Err(format!("rpi3: no load line in:\n{uart}"));
    }
    Ok(format!("\n## QEMU raspi3b, -icount shift=0, loading 16 MiB (the data path the card line names)\n\n    {card}\n    {load}\n\nEvery core counts (the others wait in WFE). QEMU's orangepi-pc does not get through U-Boot's SPL under -icount in reasonable time. QEMU's DMA engine on raspi3b moves a whole transfer the moment it starts (no DREQ, no bus time), so its figure is the driver's and the kernel's work only.\n"))
}
