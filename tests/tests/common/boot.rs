//! Booting the kernel in QEMU from the tests: build once, image per case, run with a time limit.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub struct Built {
    pub kernel: PathBuf,
    pub host: PathBuf,
    pub board: xtask::Board,
}

/// Build the kernel for `board` (for QEMU) and the PC runner, once per test binary and board.
pub fn built(board: &str) -> &'static Built {
    static BUILT: OnceLock<std::sync::Mutex<std::collections::HashMap<String, &'static Built>>> =
        OnceLock::new();
    let mut map = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(b) = map.get(board) {
        return b;
    }
    let b = xtask::board(board).unwrap_or_else(|e| panic!("{e}"));
    let kernel = xtask::build_kernel(&b, true).unwrap_or_else(|e| panic!("{e}"));
    let host = xtask::build_host().unwrap_or_else(|e| panic!("{e}"));
    let q = Command::new(&b.qemu_binary).arg("--version").output();
    assert!(
        q.is_ok(),
        "{} not found: run `cargo xtask setup`",
        b.qemu_binary
    );
    let built: &'static Built = Box::leak(Box::new(Built {
        kernel,
        host,
        board: b,
    }));
    map.insert(board.to_string(), built);
    built
}

pub fn image_dir() -> PathBuf {
    let d = xtask::workspace_root().join("target").join("test-images");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What `lmboot-host` prints for these settings (its stdout, without the final newline it adds).
pub fn host_text(b: &Built, model: &Path, s: &xtask::Settings) -> String {
    let out = super::host_ok(&b.host, model, s.host_args());
    let mut t = String::from_utf8(out.stdout).expect("host output is UTF-8");
    assert!(t.ends_with('\n'));
    t.pop();
    t
}

/// Boot with `image`; returns (exit code, UART text with CRLF turned into LF).
pub fn boot(
    b: &Built,
    image: &Path,
    mem: Option<&str>,
    extra: &[String],
    limit: Duration,
) -> (i32, String) {
    boot_smp(b, image, mem, None, extra, limit)
}

/// [`boot`] with a core count (`None`: the board's).
pub fn boot_smp(
    b: &Built,
    image: &Path,
    mem: Option<&str>,
    smp: Option<u32>,
    extra: &[String],
    limit: Duration,
) -> (i32, String) {
    let opts = xtask::QemuOpts {
        mem: mem.map(String::from),
        smp,
        extra: extra.to_vec(),
        ..Default::default()
    };
    boot_with(b, image, &opts, limit)
}

/// [`boot`] with any QEMU overrides.
pub fn boot_with(
    b: &Built,
    image: &Path,
    opts: &xtask::QemuOpts,
    limit: Duration,
) -> (i32, String) {
    boot_input(b, image, opts, None, limit)
}

/// [`boot_with`], typing `input` on the serial line (all of it at once, as a pipe does).
pub fn boot_input(
    b: &Built,
    image: &Path,
    opts: &xtask::QemuOpts,
    input: Option<&[u8]>,
    limit: Duration,
) -> (i32, String) {
    // Firmware (OpenSBI) has been seen to hang before reaching the kernel, rarely and only under
    // heavy load; a boot whose kernel has not printed its banner within this time is tried again.
    const START_LIMIT: Duration = Duration::from_secs(120);
    for attempt in 1..=2 {
        match boot_once(b, image, opts, input, limit, START_LIMIT) {
            Some(r) => return r,
            None => eprintln!("boot attempt {attempt}: no kernel banner within {START_LIMIT:?} (firmware hang); retrying"),
        }
    }
    panic!("the kernel never started (firmware hung twice)");
}

/// One boot; `None` if the kernel's banner did not appear within `start_limit`.
fn boot_once(
    b: &Built,
    image: &Path,
    opts: &xtask::QemuOpts,
    input: Option<&[u8]>,
    limit: Duration,
    start_limit: Duration,
) -> Option<(i32, String)> {
    let mut c = xtask::qemu_command(&b.board, &b.kernel, image, opts);
    c.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = c
        .spawn()
        .unwrap_or_else(|e| panic!("starting QEMU: {e} (run `cargo xtask setup`)"));
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        loop {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => sink.lock().unwrap().extend_from_slice(&buf[..n]),
            }
        }
    });
    let start = Instant::now();
    // The input is typed once the chat's first prompt is up (what a user does; bytes that arrive
    // while the UART is being set up may be lost, as on any serial line), then kept open until
    // QEMU ends.
    let mut typed = input.is_none();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if !typed && String::from_utf8_lossy(&seen.lock().unwrap()).contains("\n> ") {
            use std::io::Write;
            if let (Some(w), Some(bytes)) = (stdin.as_mut(), input) {
                let _ = w.write_all(bytes);
                let _ = w.flush();
            }
            typed = true;
        }
        let started = String::from_utf8_lossy(&seen.lock().unwrap()).contains("lmboot 0.1.0 on");
        if !started && start.elapsed() > start_limit {
            let _ = child.kill();
            let _ = child.wait();
            let _ = reader.join();
            return None;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let _ = reader.join();
            let out = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
            panic!("QEMU did not finish within {limit:?}; UART so far:\n{out}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = reader.join();
    let out = String::from_utf8_lossy(&seen.lock().unwrap()).replace("\r\n", "\n");
    Some((status.code().unwrap_or(-1), out))
}

/// Boot a virt aarch64 card `name` with `model` and settings `s` (QEMU options `opts`): QEMU
/// exits with 0 and the kernel prints exactly what `lmboot-host` prints. Returns the UART.
pub fn matches_host(
    name: &str,
    model: &Path,
    s: &xtask::Settings,
    opts: &xtask::QemuOpts,
    limit: Duration,
) -> String {
    let b = built("qemu-virt-aarch64");
    let want = host_text(b, model, s);
    let img = make_image(name, s, model);
    let (code, uart) = boot_with(b, &img, opts, limit);
    eprintln!("{uart}");
    assert_eq!(code, 0, "QEMU exit status");
    assert!(!want.is_empty());
    assert_eq!(generated(&uart), want, "kernel and lmboot-host disagree");
    uart
}

/// The first line of `uart` that starts with `prefix`.
pub fn line<'a>(uart: &'a str, prefix: &str) -> &'a str {
    uart.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| {
            panic!(
                "no {prefix:?} line in:
{uart}"
            )
        })
}

/// The generated text between the kernel's markers.
pub fn generated(uart: &str) -> &str {
    let begin = runtime::run::BEGIN_OUTPUT;
    let end = runtime::run::END_OUTPUT;
    let s = uart
        .find(&format!("{begin}\n"))
        .unwrap_or_else(|| panic!("no {begin} marker in:\n{uart}"))
        + begin.len()
        + 1;
    let e = uart[s..]
        .find(&format!("\n{end}"))
        .unwrap_or_else(|| panic!("no {end} marker in:\n{uart}"));
    &uart[s..s + e]
}

/// Make an image with `lmboot.txt` for `s` and the model file (or `model_bytes` in its place).
pub fn make_image(name: &str, s: &xtask::Settings, model: &Path) -> PathBuf {
    make_card(built("qemu-virt-aarch64"), name, s, model)
}

/// A card image for `b`'s board holding `lmboot.txt` for `s` and `model`.
pub fn make_card(b: &Built, name: &str, s: &xtask::Settings, model: &Path) -> PathBuf {
    let img = image_dir().join(format!("{name}.img"));
    xtask::card_image(&b.board, Some(&b.kernel), s, model, &img).unwrap_or_else(|e| panic!("{e}"));
    img
}

/// [`built`] for `board`, and its card `name` ([`make_card`]) with `s` and the default model.
pub fn card(board: &str, name: &str, s: &xtask::Settings) -> (&'static Built, PathBuf) {
    let b = built(board);
    let img = make_card(b, name, s, &super::model_path());
    (b, img)
}

/// The settings of most boot tests: "Once upon a time", greedy, `n` tokens.
pub fn once(n: usize) -> xtask::Settings {
    xtask::Settings {
        prompt: "Once upon a time".into(),
        n,
        ..Default::default()
    }
}

/// Break the FAT boot sector's signature in the card image `img` (the partition's first block).
pub fn break_boot_signature(img: &Path) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(img).unwrap();
    f.seek(SeekFrom::Start(xtask::image::PART_START_LBA * 512 + 510))
        .unwrap();
    f.write_all(&[0x12, 0x34]).unwrap();
}

/// The self-test's end on a boot with `selftest = full`: every check printed its line and passed
/// or was skipped (none failed), the clocks check among them, and the `lmboot-report:` line fits
/// [`report::MAX_LEN`] and `cargo xtask report` decodes it, naming `board`. Returns the line.
pub fn selftest_passed<'a>(uart: &'a str, board: &str) -> &'a str {
    let report = line(uart, report::PREFIX);
    assert!(report.len() <= report::MAX_LEN, "{report}");
    let decoded = xtask::report::decode(uart).unwrap_or_else(|e| panic!("{e}: {report}"));
    assert!(
        decoded.contains(&format!("| board | {board} |")),
        "{decoded}"
    );
    let verdicts = report
        .split(' ')
        .find_map(|f| f.strip_prefix("verdicts="))
        .unwrap_or_else(|| panic!("no verdicts in {report}"));
    for v in verdicts.split(',') {
        let (check, verdict) = v.split_once(':').unwrap_or((v, ""));
        assert!(
            verdict == "ok" || verdict == "skip",
            "{check}: {verdict}\n{report}\n{uart}"
        );
        line(uart, &format!("selftest: {check} {verdict}"));
    }
    assert!(verdicts.contains("clocks:"), "{report}");
    report
}
