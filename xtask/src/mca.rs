//! `cargo xtask bench --only mca`: estimated cycles per weight block of the hot inner loops (every
//! loop a Q4_K_M model runs, and SmolLM2's Q4_1: one row, four rows, batched, the activation
//! quantizers; [`rows`]) with llvm-mca on published CPU models, beside llama.cpp's loops for the
//! same types run through the same tool.
//!
//! Our loops come from `rustc --emit asm` of `inference` (release profile), llama.cpp's from
//! `clang -O3 -S` of ggml's CPU quant files, vendored in the `llama-cpp-python` sdist that pip
//! downloads into the cache. From each function one loop (or one block's path) is cut out
//! (`asm::hot_loop`) and run by `llvm-mca -iterations=N`; cycles per block = total cycles / N /
//! blocks per iteration.
//! Not part of `cargo xtask test`: it needs LLVM 19 (`llvm-mca-19`, `clang-19`).

mod asm;
mod llama;
mod rows;
mod unit;

use crate::llamacpp::have;
use crate::table_head;
use asm::Pick;
pub use rows::{k_quant_x4_rows, rows};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Iterations llvm-mca simulates per loop (enough that the pipeline fill is noise).
const ITERATIONS: u32 = 500;
/// VLEN of the SiFive X280 (its LLVM scheduling model's vector length).
const X280_VLEN: usize = 512;
/// Blocks per pass of our RVV q32 kernels at e8/m1 with vl = VLMAX.
const RVV_BLOCKS: f64 = (X280_VLEN / 8) as f64;

/// A CPU model of llvm-mca.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cpu {
    A53,
    A55,
    X280,
}

impl Cpu {
    fn name(self) -> &'static str {
        match self {
            Cpu::A53 => "cortex-a53",
            Cpu::A55 => "cortex-a55",
            Cpu::X280 => "sifive-x280",
        }
    }

    fn triple(self) -> &'static str {
        match self {
            Cpu::X280 => "riscv64",
            _ => "aarch64",
        }
    }

    fn riscv(self) -> bool {
        self == Cpu::X280
    }
}

/// Where a loop's assembly comes from.
#[derive(Debug, Clone, Copy)]
pub enum Src {
    /// Our function at this path (`neon::q32::...` under `inference::quant`), built for the CPU.
    Ours(&'static str),
    /// llama.cpp's C function in this unit.
    Llama(llama::Unit, &'static str),
    /// The unit-stride alternative (`unit::q4_1_unit_stride`; `true`: with Zfhmin).
    UnitStride(bool),
}

/// One loop to measure and what one iteration covers.
#[derive(Debug, Clone, Copy)]
pub struct Loop {
    pub src: Src,
    pub pick: Pick,
    /// Weight blocks per iteration (block·column products for the batched kernels).
    pub blocks: f64,
}

/// A line of the table.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub name: &'static str,
    pub cpu: Cpu,
    pub ours: Loop,
    pub theirs: Option<Loop>,
    pub note: &'static str,
}

const fn l(src: Src, pick: Pick, blocks: f64) -> Loop {
    Loop { src, pick, blocks }
}

/// The measured loop: its instructions and llvm-mca's cycles per block.
struct Measured {
    instructions: usize,
    per_block: f64,
}

/// The tools the bench runs: installed on first use (Debian's `llvm-19` and `clang-19`, through
/// the script `cargo xtask setup` uses; not part of the setup, which tests do not need them), or
/// which package to install.
fn check_tools() -> Result<(), String> {
    let tools = [("llvm-mca-19", "llvm-19"), ("clang-19", "clang-19")];
    if tools.iter().all(|(t, _)| have(t)) {
        return Ok(());
    }
    let mut c = Command::new("bash");
    c.arg(crate::workspace_root().join("xtask/scripts/install-qemu.sh"))
        .arg(crate::cache_dir())
        .args(tools.map(|(_, p)| p));
    let _ = c.status();
    match tools.iter().find(|(t, _)| !have(t)) {
        None => Ok(()),
        Some((tool, pkg)) => Err(format!(
            "{tool} not found: install Debian's {pkg} (`sudo apt-get install {pkg}`)"
        )),
    }
}

/// The first line of `llvm-mca-19 --version` that names the version.
fn mca_version() -> String {
    Command::new("llvm-mca-19")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .find(|l| l.contains("version"))
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "llvm-mca-19".into())
}

/// Run llvm-mca on `code` for `cpu`; cycles per iteration.
fn mca(cpu: Cpu, code: &str) -> Result<f64, String> {
    let mut c = Command::new("llvm-mca-19");
    c.arg(format!("-mtriple={}", cpu.triple()))
        .arg(format!("-mcpu={}", cpu.name()))
        .arg(format!("-iterations={ITERATIONS}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().map_err(|e| format!("llvm-mca-19: {e}"))?;
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().ok_or("llvm-mca-19: no stdin")?;
        stdin
            .write_all(code.as_bytes())
            .map_err(|e| format!("llvm-mca-19: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("llvm-mca-19: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].trim().parse().ok()
    };
    match (field("Iterations:"), field("Total Cycles:")) {
        (Some(n), Some(c)) if out.status.success() && n > 0.0 => Ok(c / n),
        _ => Err(format!(
            "llvm-mca-19 -mcpu={} failed:\n{}\n--- input ---\n{code}",
            cpu.name(),
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

/// Our assembly for `cpu` (one `rustc --emit asm` of `inference` per CPU, cached per run).
fn ours_asm(cpu: Cpu, dir: &Path) -> Result<PathBuf, String> {
    let out = dir.join(format!("inference-{}.s", cpu.name()));
    // The RVV kernels are `asm!` with `.option arch, +v`; the crate is built without +v, as
    // for the boards. The aarch64 builds are tuned for the modelled core.
    let (target, cpu_flag) = match cpu {
        Cpu::X280 => ("riscv64gc-unknown-none-elf", None),
        c => (
            "aarch64-unknown-none",
            Some(format!("target-cpu={}", c.name())),
        ),
    };
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(crate::workspace_root())
        .args([
            "rustc",
            "--release",
            "-p",
            "inference",
            "--target",
            target,
            "--",
        ])
        .arg(format!("--emit=asm={}", out.display()));
    if let Some(f) = cpu_flag {
        c.args(["-C", &f]);
    }
    eprintln!(
        "xtask: mca: building inference's assembly for {}",
        cpu.name()
    );
    let ok = c.status().map_err(|e| format!("cargo: {e}"))?.success();
    if !ok || !out.exists() {
        return Err(format!("cargo rustc --emit asm for {target} failed"));
    }
    Ok(out)
}

/// The assembly text of `src` for `cpu` (files cached in `texts` by path).
fn source_text(
    src: Src,
    cpu: Cpu,
    dir: &Path,
    texts: &mut Vec<(PathBuf, String)>,
) -> Result<String, String> {
    let path = match src {
        Src::UnitStride(zfh) => return Ok(unit::q4_1_unit_stride(zfh)),
        Src::Ours(_) => dir.join(format!("inference-{}.s", cpu.name())),
        Src::Llama(u, _) => llama::asm_path(u, dir),
    };
    if !texts.iter().any(|(p, _)| *p == path) {
        let made = match src {
            Src::Llama(u, _) => llama::compile(u, dir)?,
            _ => ours_asm(cpu, dir)?,
        };
        let t = fs::read_to_string(&made).map_err(|e| format!("{}: {e}", made.display()))?;
        texts.push((path.clone(), t));
    }
    Ok(texts
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, t)| t.clone())
        .unwrap_or_default())
}

/// The loop's instructions: the function's (following a wrapper's tail call), cut by `pick`.
fn loop_code(text: &str, src: Src, pick: Pick, riscv: bool) -> Result<String, String> {
    let name = match src {
        Src::UnitStride(_) => return Ok(text.to_string()),
        Src::Llama(_, f) => f.to_string(),
        Src::Ours(p) => {
            let prefix = asm::mangled_prefix(&format!("inference::quant::{p}"));
            asm::symbol_with_prefix(text, &prefix)
                .ok_or_else(|| format!("{p}: no symbol {prefix}… in the assembly"))?
                .to_string()
        }
    };
    let mut body = asm::function(text, &name).ok_or_else(|| format!("no function {name}"))?;
    if let Some(target) = asm::tail_call(&body, riscv) {
        body = asm::function(text, target).ok_or_else(|| format!("no function {target}"))?;
    }
    let lines = asm::hot_loop(&body, pick, riscv).map_err(|e| format!("{name}: {e}"))?;
    Ok(lines.join("\n") + "\n")
}

fn measure(
    lp: &Loop,
    cpu: Cpu,
    dir: &Path,
    texts: &mut Vec<(PathBuf, String)>,
) -> Result<Measured, String> {
    let text = source_text(lp.src, cpu, dir, texts)?;
    let code = loop_code(&text, lp.src, lp.pick, cpu.riscv())?;
    // The cut loop stays in the cache for inspection.
    let name: String = format!("{:?}-{}", lp.src, cpu.name())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let _ = fs::create_dir_all(dir.join("loops"));
    let _ = fs::write(dir.join("loops").join(name + ".s"), &code);
    let cycles = mca(cpu, &code)?;
    let instructions = code
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.ends_with(':'))
        .count();
    Ok(Measured {
        instructions,
        per_block: cycles / lp.blocks,
    })
}

/// Run every row; the markdown table (also written to `results/mca.md`).
pub fn run() -> Result<String, String> {
    check_tools()?;
    let dir = crate::cache_dir().join("mca");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut texts = Vec::new();
    let mut md = String::new();
    let _ = writeln!(md, "# Estimated cycles per weight block (llvm-mca)\n");
    let _ = writeln!(
        md,
        "{}, -iterations={ITERATIONS}; one loop iteration = the blocks in the notes (per block·column for the batched kernels).\n",
        mca_version()
    );
    table_head(
        &mut md,
        "| loop | CPU model | ours cycles/block | llama.cpp cycles/block | ratio | notes |",
    );
    for row in rows() {
        md += &measured_line(&row, &dir, &mut texts)?;
    }
    for row in k_quant_x4_rows() {
        md += &if built(&row, &dir, &mut texts)? {
            measured_line(&row, &dir, &mut texts)?
        } else {
            eprintln!("xtask: mca: {} on {}: not built", row.name, row.cpu.name());
            format!(
                "| {} | {} | not built | – | – | {} |\n",
                row.name,
                row.cpu.name(),
                row.note
            )
        };
    }
    md += NOTES;
    crate::bench::write_results("mca", &md, None)?;
    Ok(md)
}

/// The row measured, as a line of the table.
fn measured_line(
    row: &Row,
    dir: &Path,
    texts: &mut Vec<(PathBuf, String)>,
) -> Result<String, String> {
    eprintln!("xtask: mca: {} on {}", row.name, row.cpu.name());
    let ours = measure(&row.ours, row.cpu, dir, texts)?;
    let theirs = match &row.theirs {
        Some(t) => Some(measure(t, row.cpu, dir, texts)?),
        None => None,
    };
    Ok(table_line(row, &ours, theirs.as_ref()) + "\n")
}

/// Whether our function of `row` is in our assembly for its CPU.
fn built(row: &Row, dir: &Path, texts: &mut Vec<(PathBuf, String)>) -> Result<bool, String> {
    let Src::Ours(p) = row.ours.src else {
        return Ok(true);
    };
    let text = source_text(row.ours.src, row.cpu, dir, texts)?;
    let prefix = asm::mangled_prefix(&format!("inference::quant::{p}"));
    Ok(asm::symbol_with_prefix(&text, &prefix).is_some())
}

fn table_line(row: &Row, ours: &Measured, theirs: Option<&Measured>) -> String {
    let (t, ratio, ti) = match theirs {
        Some(t) => (
            format!("{:.2}", t.per_block),
            format!("{:.2}", ours.per_block / t.per_block),
            format!(
                ", theirs {} instr × {} blocks",
                t.instructions,
                fmt_blocks(row.theirs)
            ),
        ),
        None => ("–".into(), "–".into(), String::new()),
    };
    format!(
        "| {} | {} | {:.2} | {t} | {ratio} | {}; ours {} instr × {} blocks{ti} |",
        row.name,
        row.cpu.name(),
        ours.per_block,
        row.note,
        ours.instructions,
        fmt_blocks(Some(row.ours)),
    )
}

fn fmt_blocks(l: Option<Loop>) -> String {
    l.map_or(String::new(), |l| format!("{}", l.blocks))
}

const NOTES: &str = "
Blocks: Q4_1, Q5_0, Q8_0 (and Q8_1, Q8_0 activations) blocks of 32 values; Q4_K, Q5_K, Q6_K · Q8_K super-blocks
of 256; quantizer blocks of 32 (Q8_1, Q8_0) or 256 (Q8_K). Ratio = ours / llama.cpp (below 1: ours takes fewer
estimated cycles). A Q4_K_M file holds Q4_K and Q6_K tensors and, for some tensors, Q5_K, Q5_0 or Q8_0 (per
architecture, and where a row is not a multiple of 256); its activations go through the Q8_K and Q8_0 quantizers.
Q4_1 · Q8_1 is SmolLM2's.

Assumptions. llvm-mca simulates the loop body as straight-line code repeated, with the CPU model's latencies and
throughputs, all loads hitting L1 and every branch predicted; it cannot know `vl`. The sifive-x280 model (VLEN 512)
charges a vector instruction by its LMUL and SEW (set by the `vsetvli` in the loop text) as if vl = VLMAX: our RVV
q32 pass is counted as VLEN/8 = 64 blocks (vl = VLMAX at e8/m1), llama.cpp's RVV Q4_1 loop as one block with vl = 16
at m1, its Q5_0 and Q8_0 loops as one block with vl = 32 at m2 (each charged as full registers). Our crate is built
without `+v` (the kernels are `asm!`), llama.cpp with `-march=rv64gcv`, and at VLEN 512 it runs: Q4_K
`ggml_vec_dot_q4_K_q8_K_vl256` (its loop for VLEN ≥ 256), Q5_K `ggml_vec_dot_q5_K_q8_K` (one loop, vl = 32, for
every VLEN), Q6_K `ggml_vec_dot_q6_K_q8_K_vl512` (its dispatch picks the loop by VLEN: 128, 256, 512, 1024), Q5_0
the VLEN > 128 branch of its loop (clang splits the loop in two on `vlenb`; the second is that one). The aarch64
builds use `-C target-cpu` / `-mcpu` of the modelled core; SDOT rows use cortex-a55 (llama.cpp then compiles its
`__ARM_FEATURE_DOTPROD` branches). The loops fed to llvm-mca are kept in the cache (`mca/loops/`).

Cutting. Most rows are one loop: the innermost with the most instructions, or the first (llama.cpp's NEON Q5_0
and Q8_0 loops, 2 blocks, come before a scalar tail loop that is larger). A loop with an inner loop of fixed trip
count the compiler did not unroll is written out: llama.cpp's NEON `j` loops on cortex-a53 (Q4_K and Q5_K 4 × 64
values, Q6_K 2 × 128). Ours on the X280 run one `vl` pass per iteration: the one-row and `_x4` rows are the same
pass (the four rows run it row after row); batched, each pass is decoded once and the column loop is priced, per
block·column (Q5_0 rows in pairs: 2 × 64 blocks per column; Q8_0 rows alone). The batched K-quant rows price the
column loop (the decode once per block for all columns not counted) against llama.cpp's one-row loop, which it runs
per column. The unit-stride rows price the other RVV layout for Q4_1 (one block per iteration, as llama.cpp's loop)
against the segment-load pass above them; the `instr × blocks` notes say what one iteration covers.

Paths through branches. Where a block's work has branches (f16 scales converted in software, a max of 256 values,
rare cases), the common path is written out: either the block loop with each loop inside it written out its trip
count (a rare loop dropped), or the basic blocks the path runs, each cut at its branch to the next (checked to
connect). Our RVV Q6_K one-row loop and both RVV Q8_0 quantizers take the path of a normal f16 scale (ours through
`half` in the Q6_K loop and an integer rounding of the mantissa in the quantizer, llama.cpp through ggml's
FP32_TO_FP16, all software: no Zfh). The Q8_K quantizers: ours on NEON, the max/min
loop 63 times (4 values each after the first 4), then the 16 groups; the tie scan (only when the largest and the
smallest value have the same |x|) is left out. llama.cpp's Arm `quantize_row_q8_K` is its reference C
(`quantize_row_q8_K_ref` in `ggml-quants.c`, compiled as the others): a scalar max loop (32 values per iteration,
8 times), then the quantization and the 16 sums written out straight. On the X280 both run vl = 128 (e32, m8): ours
the max pass twice, the first-max scan twice (an upper bound: it stops in the pass that holds the max, the first
half of the time), the quantize pass twice and the 16 sums by segment loads; llama.cpp the max/min pass twice, then
twice a quantize pass whose 8 group sums slide the vector 7 times (a vector `vslidedown` and `vwredsum` each).
";
