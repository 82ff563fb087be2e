//! `cargo xtask bench`: instruction counts per token on QEMU boards under `-icount shift=0`, for
//! each kernel set and 1 or 4 cores; a markdown table and an SVG bar chart under `results/`.

use crate::{
    board, build_kernel, card_image, ensure_model, qemu_command, workspace_root, QemuOpts, Settings,
};
use std::fmt::Write as _;
use std::fs;
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
    pub per_generated_token: u64,
    pub critical_path: Option<u64>,
    pub per_core: Vec<u64>,
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

/// Boot `case` with the default model and prompt; parse the stats.
pub fn measure(case: &Case, n: usize) -> Result<Figures, String> {
    let b = board(case.board)?;
    let kernel = build_kernel(&b, true)?;
    let model = ensure_model()?;
    let settings = Settings {
        prompt: "Once upon a time".into(),
        n,
        kernels: case.kernels.into(),
        measure_cores: (case.cores > 1).then_some(case.cores),
        ..Default::default()
    };
    let img = workspace_root()
        .join("target")
        .join(format!("bench-{}.img", case.board));
    card_image(&b, Some(&kernel), &settings, &model, &img)?;
    let opts = QemuOpts {
        smp: Some(1),
        cpu: Some(case.cpu.into()),
        icount: true,
        ..Default::default()
    };
    let out = qemu_command(&b, &kernel, &img, &opts)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("QEMU: {e}"))?;
    let uart = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    if !out.status.success() {
        return Err(format!(
            "{} {} {}: exit {:?}\n{uart}",
            case.board,
            case.cpu,
            case.kernels,
            out.status.code()
        ));
    }
    let mut f = Figures::default();
    for line in uart.lines() {
        if line.starts_with("stats: instructions:") {
            f.per_prompt_token = num_after(line, "(").unwrap_or(0);
            f.per_generated_token = num_after(line, "generation ").unwrap_or(0);
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
    let dir = workspace_root().join("results");
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    fs::write(dir.join("bench.md"), &md).map_err(|e| e.to_string())?;
    fs::write(dir.join("bench.svg"), svg).map_err(|e| e.to_string())?;
    Ok(md)
}

/// The default matrix: virt aarch64 (scalar / NEON on a Cortex-A53, NEON+dotprod on a Cortex-A76)
/// and virt riscv64 (scalar, RVV at VLEN 128 and 256), 1 and 4 cores.
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

/// Only the cases of `board` (or all with `None`).
pub fn cases_for(board: Option<&str>) -> Vec<Case> {
    default_cases()
        .into_iter()
        .filter(|c| board.is_none_or(|b| c.board == b))
        .collect()
}
