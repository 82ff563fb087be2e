//! `lmboot-host`: the PC runner, a thin std shell over `inference` (the same model, kernels,
//! tokenizer, sampler and generation loop the boards run).
//!
//!     lmboot-host --model M.gguf|NAME --prompt TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p M]
//!                 [--repeat-penalty R] [--seed S] [--ctx N] [--threads N] [--batch B] [--no-special]
//!                 [--pread]
//!     lmboot-host --model M.gguf --teacher GOLDEN.txt --dump-logits OUT.f32
//!     lmboot-host --model M.gguf --info
//!
//! `--model` takes a GGUF file, or a model name of the registry (the `models` crate) whose file
//! `cargo xtask fetch-model NAME` has put in the cache (this runner never downloads).
//!
//! Text streams to stdout; statistics go to stderr at the end. Weights are read through the
//! `Storage` trait: memory-mapped (zero-copy) by default, or with positioned reads (`--pread`).

mod boardsim;
mod pool;
mod ringplan;
mod simdraft;
mod spec;
mod sweep;

use inference::generate::{Engine, GenReport, StopReason};
use inference::gguf::Value;
use inference::model::{Model, RunState};
use inference::sampler::{Given, Sampler, SamplerConfig};
use inference::speculate::SpecStats;
use inference::storage::FileStorage;
use inference::tokenizer::{StreamDecoder, Tokenizer};
use inference::{Gguf, Kernels, Storage, StorageError};
use std::io::Write;
use std::path::PathBuf;
use std::process::exit;
use std::time::Instant;

const USAGE: &str = "usage: lmboot-host --model FILE.gguf|NAME [options]

  --model FILE|NAME      a GGUF file, or a model fetched by `cargo xtask fetch-model NAME`
                         (cargo xtask fetch-model --list shows the names)

  --prompt TEXT          the prompt (special tokens such as <|im_start|> are parsed)
  --prompt-file FILE     read the prompt from a file
  -n N                   tokens to generate (default 64)
  --temp T               temperature, 0 = greedy (default 0.8)
  --top-k K              (default 40, 0 = off)
  --top-p P              (default 0.95)
  --min-p M              (default 0.05)
  --repeat-penalty R     (default 1.0 = off)
  --seed S               (default 0)
  --ctx N                context length (default 2048, at most the model's)
  --threads N            worker threads (default 1)
  --batch B              prompt tokens per forward pass, 1 to 64 (default 32); every B gives the
                         same logits, bit for bit
  --no-special           treat special-token text in the prompt as plain text
  --lookup N             speculative decoding: guess from earlier text that ends like the last N
                         tokens (1 to 8)
  --self-draft L         speculative decoding: the model's first L layers guess
  --draft FILE|NAME      speculative decoding: a smaller model of the same vocabulary guesses
                         (sources given together are asked in that order: lookup, draft, self)
  --draft-vocab N|auto|all
                         the draft model guesses among the N lowest token ids and the context's
                         tokens only (its output head cut to those rows, in RAM); auto (default)
                         keeps it whole unless --board-sim's memory is short
  --draft-max K          most guesses checked per pass (1 to 63, default 8)
  --speculate auto|off|K how many guesses to check: auto (default) measures what pays, off runs
                         the plain loop, K always checks K; the output is the plain loop's either
                         way (greedy: the same tokens; sampled: the same distribution)
  --pread                read weights with positioned reads instead of mmap
  --teacher GOLDEN.txt   teacher-forced run over a golden case's prompt_ids and generated_ids
  --dump-logits OUT.f32  with --teacher: write one row of logits per step
  --exact LIST           with --teacher: make approximations exact, to measure the error budget
                         (comma-separated: q k v gate up o down output acts kv attention)
  --board-sim B --mem M  run as board B (zero2w, pi4) with M of RAM (e.g. 512M) would: the weights
                         through the kernel's page cache, on a clock of that board's card and
                         cores; prints the time and card bytes per generated token
  --kernels NAME         the kernel set (scalar, neon, neon-dotprod, rvv, xtheadvector, avx2),
                         trusting that the CPU has it (under a user-mode emulator whose CPU
                         model says so: the RISC-V sets cannot be detected from user mode);
                         default: the fastest this CPU is known to run
  --info                 print the model's metadata and tensor table
  --cache-sweep MIB,...  bytes read per generated token through the runtime's page cache of each
                         size (MiB), resident-prefix with and without read-ahead, and LRU (-n tokens)
  --ring-plan N,RAM,RATE,CARD,BAUD
                         the ring planner's split and time per token for N boards alike (RAM free,
                         matrix bytes/s on all cores, card bytes/s, link baud; K/M/G suffixes),
                         beside one such board alone (--ctx and --batch size the buffers)
";

struct Args {
    /// `--model` as given: a file or a registry name ([`models::cached`] tells which).
    model: Option<String>,
    prompt: Option<String>,
    n: usize,
    sampler: SamplerConfig,
    /// The sampling flags given (the model's recommendations fill the others).
    given: Given,
    ctx: usize,
    threads: usize,
    batch: usize,
    special: bool,
    pread: bool,
    teacher: Option<PathBuf>,
    exact: inference::model::exact::Exact,
    dump: Option<PathBuf>,
    info: bool,
    sweep: Option<String>,
    ring_plan: Option<String>,
    spec: inference::speculate::SpecSettings,
    board_sim: Option<String>,
    mem: Option<u64>,
    kernels: Option<String>,
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("lmboot-host: {msg}");
    exit(1)
}

/// The kernel set `--kernels` names (its features recorded as the CPU's), or the fastest known.
fn kernels(name: Option<&str>) -> Kernels {
    use inference::quant::{features, set_features, Features, SET_CHOICES};
    let Some(name) = name else {
        return Kernels::best();
    };
    let mut f: Features = features();
    match name {
        "neon" => f.neon = true,
        "neon-dotprod" => (f.neon, f.dotprod) = (true, true),
        "rvv" => (f.rvv, f.xtheadvector) = (true, false),
        "xtheadvector" => (f.rvv, f.xtheadvector) = (false, true),
        "avx2" => f.avx2 = true,
        _ => {}
    }
    set_features(f);
    Kernels::by_name(name).unwrap_or_else(|| {
        fail(format!(
            "--kernels {name}: not a set built for this architecture ({SET_CHOICES})"
        ))
    })
}

fn parse_args() -> Args {
    let mut a = Args {
        model: None,
        prompt: None,
        n: 64,
        sampler: SamplerConfig::default(),
        given: Given::default(),
        ctx: 2048,
        threads: 1,
        batch: 32,
        special: true,
        pread: false,
        teacher: None,
        exact: Default::default(),
        dump: None,
        info: false,
        sweep: None,
        ring_plan: None,
        spec: Default::default(),
        board_sim: None,
        mem: None,
        kernels: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .unwrap_or_else(|| fail(format!("{name} needs a value")))
        };
        fn num<T: std::str::FromStr>(name: &str, v: String) -> T {
            v.parse()
                .unwrap_or_else(|_| fail(format!("{name}: {v:?} is not a valid number")))
        }
        let setting = match arg.as_str() {
            "--temp" => "temperature",
            "--top-k" => "top_k",
            "--top-p" => "top_p",
            "--min-p" => "min_p",
            "--repeat-penalty" => "repeat_penalty",
            _ => "",
        };
        a.given.mark(setting);
        match spec::parse(&mut a.spec, &arg, &mut val) {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => fail(e),
        }
        match arg.as_str() {
            "--model" | "-m" => a.model = Some(val("--model")),
            "--prompt" | "-p" => a.prompt = Some(val("--prompt")),
            "--prompt-file" => {
                let f = val("--prompt-file");
                a.prompt =
                    Some(std::fs::read_to_string(&f).unwrap_or_else(|e| fail(format!("{f}: {e}"))))
            }
            "-n" | "--n-predict" => a.n = num("-n", val("-n")),
            "--temp" => a.sampler.temperature = num("--temp", val("--temp")),
            "--top-k" => a.sampler.top_k = num("--top-k", val("--top-k")),
            "--top-p" => a.sampler.top_p = num("--top-p", val("--top-p")),
            "--min-p" => a.sampler.min_p = num("--min-p", val("--min-p")),
            "--repeat-penalty" => {
                a.sampler.repeat_penalty = num("--repeat-penalty", val("--repeat-penalty"))
            }
            "--seed" => a.sampler.seed = num("--seed", val("--seed")),
            "--ctx" => a.ctx = num("--ctx", val("--ctx")),
            "--threads" | "-t" => a.threads = num("--threads", val("--threads")),
            "--batch" | "-b" => a.batch = num("--batch", val("--batch")),
            "--no-special" => a.special = false,
            "--pread" => a.pread = true,
            "--teacher" => a.teacher = Some(val("--teacher").into()),
            "--exact" => {
                for name in val("--exact").split(',').filter(|s| !s.is_empty()) {
                    if !a.exact.set(name) {
                        fail(format!(
                            "--exact: unknown approximation {name:?}\n\n{USAGE}"
                        ));
                    }
                }
            }
            "--dump-logits" => a.dump = Some(val("--dump-logits").into()),
            "--info" => a.info = true,
            "--board-sim" => a.board_sim = Some(val("--board-sim")),
            "--kernels" => a.kernels = Some(val("--kernels")),
            "--mem" => {
                let v = val("--mem");
                a.mem =
                    Some(size(&v).unwrap_or_else(|| {
                        fail(format!("--mem: {v:?} is not a size such as 512M"))
                    }))
            }
            "--cache-sweep" => a.sweep = Some(val("--cache-sweep")),
            "--ring-plan" => a.ring_plan = Some(val("--ring-plan")),
            "-h" | "--help" => {
                print!("{USAGE}");
                exit(0);
            }
            other => fail(format!("unknown argument {other:?}\n\n{USAGE}")),
        }
    }
    if let Err(e) = a.sampler.validate() {
        fail(e);
    }
    if a.threads == 0 || a.threads > inference::parallel::MAX_WORKERS {
        fail(format!(
            "--threads {} is outside 1..={}",
            a.threads,
            inference::parallel::MAX_WORKERS
        ));
    }
    if a.batch == 0 || a.batch > inference::quant::MAX_BATCH {
        fail(format!(
            "--batch {} is outside 1..={}",
            a.batch,
            inference::quant::MAX_BATCH
        ));
    }
    a
}

/// A size in bytes with an optional K, M or G suffix (powers of 1024).
fn size(v: &str) -> Option<u64> {
    let (num, shift) = match v.as_bytes().last()? {
        b'K' | b'k' => (&v[..v.len() - 1], 10),
        b'M' | b'm' => (&v[..v.len() - 1], 20),
        b'G' | b'g' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    num.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// The model file, memory-mapped: `resident` hands out slices of the mapping (zero-copy).
pub(crate) struct MmapStorage {
    map: memmap2::Mmap,
}

impl MmapStorage {
    pub(crate) fn open(path: &std::path::Path) -> std::io::Result<Self> {
        let file = std::fs::File::open(path)?;
        // SAFETY: the mapping is read-only and private to this process; lmboot never writes the
        // model, and a concurrent writer to the file is outside what the runner supports.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(Self { map })
    }
}

impl Storage for MmapStorage {
    fn len(&self) -> u64 {
        self.map.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        inference::SliceStorage::new(&self.map).read_at(offset, buf)
    }
    fn resident(&self, offset: u64, len: usize) -> Option<&[u8]> {
        inference::storage::check_range(offset, len as u64, self.len()).ok()?;
        Some(&self.map[offset as usize..offset as usize + len])
    }
}

fn main() {
    let args = parse_args();
    let Some(model) = &args.model else {
        fail(format!("--model FILE.gguf|NAME is required\n\n{USAGE}"))
    };
    let path = models::cached(model).unwrap_or_else(|e| fail(e));
    if let Some(board) = &args.board_sim {
        let mem = args
            .mem
            .unwrap_or_else(|| fail("--board-sim needs --mem SIZE"));
        let prompt = args
            .prompt
            .as_deref()
            .unwrap_or_else(|| fail("--prompt TEXT is required"));
        let a = boardsim::SimArgs {
            board,
            mem,
            prompt,
            n: args.n,
            ctx: args.ctx,
            batch: args.batch,
            sampler: args.sampler,
            spec: &args.spec,
        };
        if let Err(e) = boardsim::figures_need(args.n).and_then(|_| boardsim::run(&path, &a)) {
            fail(e);
        }
        return;
    }
    if let Some(sizes) = &args.sweep {
        if let Err(e) = sweep::run(&path, sizes, args.n) {
            fail(e);
        }
        return;
    }
    let result = if args.pread {
        let src =
            FileStorage::open(&path).unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
        run(&args, &src)
    } else {
        let src =
            MmapStorage::open(&path).unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
        run(&args, &src)
    };
    if let Err(e) = result {
        fail(e);
    }
}

fn run<S: Storage + Sync>(args: &Args, src: &S) -> Result<(), String> {
    let g = Gguf::open(src).map_err(|e| e.to_string())?;
    if args.info {
        print_info(&g);
        return Ok(());
    }
    let t_load = Instant::now();
    let model = Model::load(&g, src).map_err(|e| e.to_string())?;
    if let Some(spec) = &args.ring_plan {
        let ctx = args.ctx.min(model.config.train_ctx);
        return ringplan::run(&model, spec, ctx, args.batch);
    }
    model
        .weights
        .check_finite(src, &mut vec![0u8; 64 * 1024])
        .map_err(|e| e.to_string())?;
    let tok = Tokenizer::from_gguf(&g, src).map_err(|e| e.to_string())?;
    let ctx = args.ctx.min(model.config.train_ctx);
    let mut st =
        RunState::with_batch(&model, ctx, args.threads, args.batch).map_err(|e| e.to_string())?;
    let pool = pool::Pool::new(args.threads);
    let engine = Engine::new(&model, src, &pool, kernels(args.kernels.as_deref()));
    let load_ms = t_load.elapsed().as_secs_f64() * 1e3;

    if let Some(teacher) = &args.teacher {
        st.set_exact(args.exact, &model);
        return teacher_forced(&engine, &mut st, teacher, args.dump.as_deref());
    }

    let prompt = args
        .prompt
        .as_deref()
        .ok_or("--prompt TEXT (or --prompt-file) is required")?;
    let ids = tok
        .encode(prompt, true, args.special)
        .map_err(|e| e.to_string())?;
    let mut cfg = args.sampler;
    let taken = cfg
        .apply_model_defaults(&g, args.given)
        .map_err(|e| format!("the model's sampling settings: {e}"))?;
    if !taken.is_empty() {
        eprintln!("sampling: the model's recommended {}", taken.join(", "));
    }
    let mut sampler = Sampler::new(cfg, model.config.vocab).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let clock = || start.elapsed().as_nanos() as u64;
    let mut out = std::io::stdout().lock();
    let mut dec = StreamDecoder::new();
    let mut write_err = None;
    let mut on_token = |t| {
        let mut ok = true;
        dec.push(tok.token_to_piece(t), |s| {
            if let Err(e) = out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
                write_err.get_or_insert(e);
                ok = false;
            }
        });
        ok
    };
    let is_end = |t| tok.is_eog(t);
    let (report, spec_stats) = if args.spec.on() {
        let draft = match &args.spec.draft {
            Some(name) => Some(spec::DraftFile::open(name, &tok)?),
            None => None,
        };
        let job = spec::Job {
            prompt: &ids,
            n: args.n,
            is_end: &is_end,
            clock: &clock,
        };
        let how = (&args.spec, draft.as_ref());
        let (r, s) = spec::generate(
            &engine,
            &mut st,
            &mut sampler,
            how,
            job,
            None,
            &mut on_token,
        )?;
        (r, Some(s))
    } else {
        let r = engine
            .generate(
                &mut st,
                &mut sampler,
                &ids,
                args.n,
                &is_end,
                &clock,
                &mut on_token,
            )
            .map_err(|e| e.to_string())?;
        (r, None)
    };
    dec.finish(|s| {
        let _ = out.write_all(s.as_bytes());
    });
    let _ = writeln!(out);
    if let Some(e) = write_err {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(format!("writing the output: {e}"));
        }
    }

    let kv = st.bytes();
    let head = Loaded {
        model: &model,
        kernels: engine.kernels.name,
        load_ms,
        ctx,
    };
    print_report(args, &head, &report, spec_stats.as_ref(), kv);
    Ok(())
}

/// What the summary says of the load: the model, the kernel set, the load time and the context.
#[derive(Clone, Copy)]
struct Loaded<'a> {
    model: &'a Model,
    kernels: &'static str,
    load_ms: f64,
    ctx: usize,
}

/// The summary on stderr after a generation: load, prompt and generation speeds, why it stopped,
/// the runtime state's bytes (`kv`: KV cache and other buffers) and the speculation line.
fn print_report(
    args: &Args,
    head: &Loaded<'_>,
    report: &GenReport,
    spec_stats: Option<&SpecStats>,
    kv: (usize, usize),
) {
    let secs = |ns: u64| ns as f64 / 1e9;
    let (kv, other) = kv;
    let Loaded {
        model,
        kernels,
        load_ms,
        ctx,
    } = *head;
    eprintln!(
        "\nlmboot-host: model {} ({}), {} threads, kernels {}, loaded in {load_ms:.0} ms",
        model.config.name,
        path_kind(args),
        args.threads,
        kernels
    );
    eprintln!(
        "prompt: {} tokens in {:.3} s ({:.1} tok/s); time to first token {:.3} s",
        report.prompt_tokens,
        secs(report.prefill_time),
        report.prompt_tokens as f64 / secs(report.prefill_time).max(1e-9),
        secs(report.first_token_time)
    );
    eprintln!(
        "generation: {} tokens in {:.3} s ({:.1} tok/s); stop: {}",
        report.generated,
        secs(report.gen_time),
        report.generated as f64 / secs(report.gen_time).max(1e-9),
        match report.stop {
            Some(StopReason::EndToken(t)) => format!("end token {t}"),
            Some(StopReason::MaxTokens) | None => "token limit".into(),
            Some(StopReason::ContextFull) => format!("context full ({ctx} positions)"),
            Some(StopReason::Stopped) => "stopped".into(),
        }
    );
    eprintln!(
        "runtime state: KV cache {} bytes ({ctx} positions, f16), other buffers {} bytes",
        kv, other
    );
    if let Some(s) = spec_stats {
        eprintln!("{}", spec::line(model, s, report.generated));
    }
}

fn path_kind(a: &Args) -> &'static str {
    if a.pread {
        "pread"
    } else {
        "mmap"
    }
}

/// Feed a golden case's prompt and generated ids; write one row of logits per step.
fn teacher_forced<S: Storage + Sync>(
    engine: &Engine<'_, S, pool::Pool>,
    st: &mut RunState,
    golden: &std::path::Path,
    dump: Option<&std::path::Path>,
) -> Result<(), String> {
    let text = std::fs::read_to_string(golden).map_err(|e| format!("{}: {e}", golden.display()))?;
    let ids = |key: &str| -> Result<Vec<u32>, String> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .ok_or(format!("{}: no {key} line", golden.display()))?;
        line.split_whitespace()
            .map(|t| t.parse().map_err(|_| format!("{key} bad id {t:?}")))
            .collect()
    };
    let (prompt, generated) = (ids("prompt_ids:")?, ids("generated_ids:")?);
    let mut out = match dump {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?,
        )),
        None => None,
    };
    engine.feed(st, &prompt).map_err(|e| e.to_string())?;
    for (step, &t) in generated.iter().enumerate() {
        let best = inference::sampler::greedy(&st.logits).map_err(|e| e.to_string())?;
        println!("step {step} best {best} forced {t}");
        if let Some(w) = out.as_mut() {
            for v in &st.logits {
                w.write_all(&v.to_le_bytes()).map_err(|e| e.to_string())?;
            }
        }
        if step + 1 < generated.len() {
            engine.feed(st, &[t]).map_err(|e| e.to_string())?;
        }
    }
    if let Some(mut w) = out {
        w.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn print_info(g: &Gguf) {
    let mut o = std::io::stdout().lock();
    let _ = (|| -> std::io::Result<()> {
        writeln!(
            o,
            "GGUF v{}, {} bytes, alignment {}, data at {}",
            g.version, g.file_len, g.alignment, g.data_offset
        )?;
        for e in &g.metadata {
            match &e.value {
                Value::Array(a) => writeln!(o, "{} = [{}; {}]", e.key, a.elem.name(), a.len)?,
                Value::String(s) if s.len() > 80 => {
                    writeln!(o, "{} = {:?}...", e.key, &s[..s.floor_char_boundary(80)])?
                }
                v => writeln!(o, "{} = {v:?}", e.key)?,
            }
        }
        for t in &g.tensors {
            writeln!(
                o,
                "{:<32} {:<5} {:?} @ {} ({} bytes)",
                t.name,
                t.ty.name(),
                t.shape(),
                t.offset,
                t.size
            )?;
        }
        Ok(())
    })();
}
