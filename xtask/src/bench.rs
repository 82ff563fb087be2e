//! `cargo xtask bench`: instruction counts per token on QEMU boards under `-icount shift=0`, for
//! each kernel set and 1 or 4 cores; a markdown table and an SVG bar chart under `results/`.

use crate::{
    board, build_kernel, card_image, cargo, ensure_model, qemu_command, run_quiet, workspace_root,
    Board, QemuOpts, Settings,
};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Stdio;

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

/// llama.cpp b4747's static builds, 1 thread, per generated token on this model and prompt (from
/// the issues; counted under qemu-user with an instruction-counting plugin).
pub const LLAMA_CPP: [(&str, u64); 3] = [
    ("llama.cpp armv8-a (NEON)", 151_300_000),
    ("llama.cpp armv8.2-a+dotprod", 118_100_000),
    ("llama.cpp rv64gcv VLEN 256", 166_400_000),
];

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
fn boot_uart(
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
    let _ = writeln!(md, "| board | cpu | kernels | cores | per prompt token | per generated token | busiest core (critical path) per generated token | vs 1 core |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
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
    for (name, v) in LLAMA_CPP {
        let _ = writeln!(md, "| {name} | | | 1 | | {} | | |", m(v));
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
    bars.extend(LLAMA_CPP.iter().map(|(n, v)| (n.to_string(), *v)));
    let max = bars.iter().map(|b| b.1).max().unwrap_or(1) as f64;
    let (w, bh) = (760.0, 26.0);
    let h = 60.0 + bars.len() as f64 * (bh + 8.0);
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
    svg.push_str("</svg>\n");
    write_results("bench", &md, Some(&svg))?;
    Ok(md)
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
    let _ = writeln!(md, "| kernels | cpu | cores | prompt tokens | B = 1 | B = 8 | B = 32 | per generated token | B = 32 / generated | llama.cpp per prompt token |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|");
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
            llama_per_prompt_token(&c.kernels, c.cores)
        );
    }
    let _ = writeln!(
        md,
        "\n4-core rows: the busiest core's share (the 4-way split run on one core). llama.cpp: b4747's \
         count per prompt token of a 4-token prompt on one core (armv8-a build for NEON, +dotprod for SDOT), \
         where known.\n"
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
/// of the 1-core count). Writes `results/models.md`.
pub fn models(n: usize) -> Result<String, String> {
    let mut md = String::new();
    let _ = writeln!(md, "# Instructions per token of other models (QEMU -icount shift=0, \"Once upon a time\", greedy, {n} tokens)\n");
    let _ = writeln!(md, "| model | kernels | cpu | cores | per prompt token | per generated token | busiest core / 1 core |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    let sets: Vec<Case> = default_cases()
        .into_iter()
        // Machines with a fixed RAM size (raspi2b) cannot take the models' RAM sizes.
        .filter(|c| c.kernels != "scalar" && !c.cpu.contains("vlen=128"))
        .filter(|c| c.board.starts_with("qemu-virt"))
        .collect();
    for (name, mem) in BENCH_MODELS {
        let model = crate::ensure_named_model(name)?;
        let mut one_core = 0;
        for c in &sets {
            eprintln!(
                "xtask: bench models {name} {} {} cores={}",
                c.cpu, c.kernels, c.cores
            );
            let settings = Settings {
                prompt: "Once upon a time".into(),
                n,
                ..Default::default()
            };
            let f = match measure_model(c, settings, Some(mem), &model) {
                Ok(f) => f,
                Err(e) if e.contains("not available on this CPU") => continue,
                Err(e) => return Err(e),
            };
            let (prompt, generated) = if c.cores > 1 {
                (
                    f.prompt_critical_path.unwrap_or(f.per_prompt_token),
                    f.critical_path.unwrap_or(f.per_generated_token),
                )
            } else {
                one_core = f.per_generated_token;
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
    write_results("models", &md, None)?;
    Ok(md)
}

/// llama.cpp's instructions per prompt token where known (b4747, a 4-token prompt, one core).
fn llama_per_prompt_token(kernels: &str, cores: usize) -> &'static str {
    match (kernels, cores) {
        ("neon", 1) => "125 M",
        ("neon-dotprod", 1) => "98 M",
        _ => "–",
    }
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
    let get = |mib: u64, name: &str| {
        points
            .iter()
            .find(|p| p.0 == mib && p.1 == name)
            .map(|p| p.2)
    };
    let mut md = String::new();
    let _ = writeln!(md, "# Bytes read from the card per generated token (SmolLM2-135M Q4_1, {model_bytes} bytes; page 256 KiB; greedy, \"Once upon a time\")\n");
    let _ = writeln!(md, "| cache | M - C | {} |", names.join(" | "));
    let _ = writeln!(md, "|---|---|{}", "---|".repeat(names.len()));
    for &mib in &mibs {
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
    // Line plot: x = cache size, y = MB per token.
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
    for &mib in &mibs {
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
    let mut series: Vec<(String, &str, Vec<(f64, f64)>)> = names
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
    write_results("pagecache", &md, Some(&svg))?;
    Ok(md)
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
    let _ = writeln!(
        md,
        "| card | read-ahead | ms/token (guest) | I/O stall ms/token | bytes read/token | text |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|");
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
/// `card_bench` test: bus time per 256 KiB page, register accesses per MB), and the CPU
/// instructions per MB the kernel spends loading from QEMU's SD hosts under `-icount`, with DMA
/// and with it compiled out (`LMBOOT_SD_PIO=1`). Writes `results/card.md`.
pub fn card() -> Result<String, String> {
    let sim = workspace_root().join("target").join("card-sim.md");
    let mut c = cargo();
    c.args([
        "test",
        "--release",
        "-p",
        "lmboot-tests",
        "--test",
        "card_bench",
        "--",
        "--ignored",
    ])
    .env("LMBOOT_CARD_BENCH", &sim);
    run_quiet(c, "the card bus benchmark (card_bench)")?;
    let mut md = fs::read_to_string(&sim).map_err(|e| format!("{}: {e}", sim.display()))?;
    md.push_str(&card_instructions()?);
    write_results("card", &md, None)?;
    Ok(md)
}

/// Instructions per MB read while loading 16 MiB of the default model, per QEMU SD host, with
/// and without DMA.
fn card_instructions() -> Result<String, String> {
    let model = ensure_model()?;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n## CPU instructions per MB read (QEMU, -icount shift=0, loading 16 MiB)\n"
    );
    let _ = writeln!(
        md,
        "| board (QEMU machine) | data path | instructions / MB | card line |"
    );
    let _ = writeln!(md, "|---|---|---|---|");
    for (name, pio) in [
        ("orangepi-h3", false),
        ("orangepi-h3", true),
        ("rpi3", false),
        ("rpi4", false),
    ] {
        let b = board(name)?;
        std::env::set_var("LMBOOT_SD_PIO", if pio { "1" } else { "0" });
        let kernel = build_kernel(&b, true);
        std::env::remove_var("LMBOOT_SD_PIO");
        let kernel = kernel?;
        let settings = Settings {
            n: 1,
            cache: "16M".into(),
            selftest: Some("panic".into()),
            ..Default::default()
        };
        let img = workspace_root()
            .join("target")
            .join(format!("bench-card-{name}-{pio}.img"));
        card_image(&b, Some(&kernel), &settings, &model, &img)?;
        let q = QemuOpts {
            icount: true,
            ..Default::default()
        };
        eprintln!(
            "xtask: bench: card, {name}{}",
            if pio { " (PIO build)" } else { "" }
        );
        // `selftest = panic` stops right after loading: a non-zero exit is expected.
        let out = qemu_command(&b, &kernel, &img, &q)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("QEMU: {e}"))?;
        let uart = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
        let per_mb = uart
            .lines()
            .find_map(|l| l.strip_prefix("load: "))
            .and_then(|l| l.split(", ").nth(1))
            .and_then(|l| l.split(' ').next())
            .ok_or_else(|| format!("{name}: no load line in:\n{uart}"))?;
        let card = uart
            .lines()
            .find(|l| l.starts_with("card: SD at"))
            .unwrap_or("")
            .rsplit("; ")
            .next()
            .unwrap_or("");
        let machine = b
            .qemu_args
            .iter()
            .skip_while(|a| *a != "-M")
            .nth(1)
            .cloned();
        let _ = writeln!(
            md,
            "| {name} ({}) | {} | {per_mb} | {card} |",
            machine.unwrap_or_default(),
            if pio {
                "PIO (DMA compiled out)"
            } else {
                "as built"
            }
        );
    }
    let _ = writeln!(md, "\nQEMU's count is of every core: the others wait (WFE/WFI) while core 0 loads. QEMU's raspi machines model no SDHCI DMA (their capabilities report none), so the Pi rows are programmed I/O; the Pi 4's ADMA2 runs only in the simulator (table above).");
    Ok(md)
}
