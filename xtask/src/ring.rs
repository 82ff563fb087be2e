//! A ring of QEMU boards: `cargo xtask ring` and the ring boot tests.
//!
//! Each board's link UART (the second PL011 of `-M virt`, at 0x0904_0000) is a socket character
//! device connected to this process, which wires the ring as the boards' serial lines would be:
//! what board k sends goes to board k + 1 (the last board's to board 1), and nothing else. A
//! QEMU socket is one two-way line to one peer, and a ring needs each board's TX and RX on
//! different neighbours, hence the wiring here rather than socket pairs. The wiring counts the
//! bytes of every hop and can cut a board out of the ring (kill its QEMU) to test faults.

use crate::{qemu_command, Board, QemuOpts};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a ring run goes.
#[derive(Debug, Clone, Default)]
pub struct RingSpec {
    /// One card image per board, board 1 (the head) first.
    pub images: Vec<PathBuf>,
    pub opts: QemuOpts,
    /// Echo the head's console as it comes (for `cargo xtask ring`).
    pub echo: bool,
    /// Kill board `.0` (1-based) once the head has printed `.1`.
    pub kill: Option<(usize, String)>,
    /// Give up after this long.
    pub limit: Duration,
}

/// What came of it.
#[derive(Debug, Clone)]
pub struct RingOutcome {
    /// The head's exit code (-1 if it was killed at the limit).
    pub code: i32,
    /// Every board's console, CRLF as LF.
    pub consoles: Vec<String>,
    /// Bytes each hop carried: `hops[k]` from board k + 1 to the next.
    pub hops: Vec<u64>,
    /// Each hop's most bytes in one second (its throughput when it was busiest).
    pub peaks: Vec<u64>,
    /// From the first byte on any hop to the last, seconds.
    pub seconds: f64,
}

struct Board1 {
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    reader: std::thread::JoinHandle<()>,
}

/// Boot the ring, wait for the head to finish (or the limit), then stop every board.
pub fn run(board: &Board, kernel: &Path, spec: &RingSpec) -> Result<RingOutcome, String> {
    let n = spec.images.len();
    if n < 2 {
        return Err("a ring needs at least 2 boards".into());
    }
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").map_err(|e| format!("listening: {e}")))
        .collect::<Result<_, _>>()?;
    let mut boards = Vec::new();
    for (k, img) in spec.images.iter().enumerate() {
        let port = listeners[k].local_addr().map_err(|e| e.to_string())?.port();
        boards.push(spawn(
            board,
            kernel,
            img,
            &spec.opts,
            port,
            spec.echo && k == 0,
        )?);
    }
    let conns = accept_all(&listeners, &mut boards)?;
    let wiring = Wiring::start(&conns)?;
    let code = wait_head(&mut boards, spec)?;
    // The followers stop when the head says so (within seconds, longer on a loaded machine);
    // then the rest are stopped.
    let grace = Instant::now() + Duration::from_secs(30);
    for b in boards.iter_mut().skip(1) {
        while Instant::now() < grace && matches!(b.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = b.child.kill();
        let _ = b.child.wait();
    }
    for c in &conns {
        let _ = c.shutdown(std::net::Shutdown::Both);
    }
    let (hops, peaks, seconds) = wiring.finish();
    let consoles = boards
        .into_iter()
        .map(|b| {
            let _ = b.reader.join();
            let bytes = b.out.lock().map(|v| v.clone()).unwrap_or_default();
            String::from_utf8_lossy(&bytes).replace("\r\n", "\n")
        })
        .collect();
    Ok(RingOutcome {
        code,
        consoles,
        hops,
        peaks,
        seconds,
    })
}

/// Start one board: its console piped here, its link UART a socket to `port`.
fn spawn(
    board: &Board,
    kernel: &Path,
    img: &Path,
    opts: &QemuOpts,
    port: u16,
    echo: bool,
) -> Result<Board1, String> {
    let mut o = opts.clone();
    o.extra.extend([
        "-chardev".to_string(),
        format!("socket,id=ring,host=127.0.0.1,port={port}"),
        "-serial".to_string(),
        "chardev:ring".to_string(),
    ]);
    let mut c = qemu_command(board, kernel, img, &o);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = c.spawn().map_err(|e| {
        format!(
            "starting {}: {e} (run `cargo xtask setup`)",
            board.qemu_binary
        )
    })?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = out.clone();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            if echo {
                let mut so = std::io::stdout();
                let _ = so.write_all(&buf[..n]);
                let _ = so.flush();
            }
            if let Ok(mut v) = sink.lock() {
                v.extend_from_slice(&buf[..n]);
            }
        }
    });
    Ok(Board1 { child, out, reader })
}

/// Each board's QEMU connects to its listener (within a minute, or it failed to start).
fn accept_all(listeners: &[TcpListener], boards: &mut [Board1]) -> Result<Vec<TcpStream>, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut conns = Vec::new();
    for (k, l) in listeners.iter().enumerate() {
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        let conn = loop {
            match l.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(format!("board {}: {e}", k + 1)),
            }
            if let Ok(Some(st)) = boards[k].child.try_wait() {
                return Err(format!(
                    "board {}'s QEMU exited ({st}) before it joined the ring",
                    k + 1
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "board {}'s QEMU never connected its link UART",
                    k + 1
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        conn.set_nonblocking(false).map_err(|e| e.to_string())?;
        let _ = conn.set_nodelay(true);
        conns.push(conn);
    }
    Ok(conns)
}

/// Wait for the head's QEMU to end (its exit code), killing board `kill` when the head has
/// printed the trigger, and everything at the limit.
fn wait_head(boards: &mut [Board1], spec: &RingSpec) -> Result<i32, String> {
    let start = Instant::now();
    let mut kill = spec.kill.clone();
    loop {
        if let Some(st) = boards[0].child.try_wait().map_err(|e| e.to_string())? {
            return Ok(st.code().unwrap_or(-1));
        }
        if let Some((b, trigger)) = &kill {
            let seen = boards[0]
                .out
                .lock()
                .map(|v| String::from_utf8_lossy(&v).contains(trigger.as_str()));
            if seen.unwrap_or(false) && *b >= 1 && *b <= boards.len() {
                let _ = boards[b - 1].child.kill();
                let _ = boards[b - 1].child.wait();
                kill = None;
            }
        }
        if start.elapsed() > spec.limit {
            let _ = boards[0].child.kill();
            let _ = boards[0].child.wait();
            return Ok(-1);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The ring's wiring: one thread a hop, copying board k's bytes to board k + 1.
struct Wiring {
    threads: Vec<std::thread::JoinHandle<()>>,
    bytes: Vec<Arc<AtomicU64>>,
    peaks: Vec<Peak>,
    first: Arc<Mutex<Option<Instant>>>,
    last: Arc<Mutex<Option<Instant>>>,
}

impl Wiring {
    fn start(conns: &[TcpStream]) -> Result<Self, String> {
        let n = conns.len();
        let first = Arc::new(Mutex::new(None));
        let last = Arc::new(Mutex::new(None));
        let mut threads = Vec::new();
        let mut bytes = Vec::new();
        let mut peaks = Vec::new();
        for k in 0..n {
            let mut from = conns[k].try_clone().map_err(|e| e.to_string())?;
            let mut to = conns[(k + 1) % n].try_clone().map_err(|e| e.to_string())?;
            let count = Arc::new(AtomicU64::new(0));
            bytes.push(count.clone());
            let peak = Peak::default();
            peaks.push(peak.clone());
            let (first, last) = (first.clone(), last.clone());
            threads.push(std::thread::spawn(move || {
                let mut buf = [0u8; 16384];
                while let Ok(got) = from.read(&mut buf) {
                    if got == 0 {
                        break;
                    }
                    let now = Some(Instant::now());
                    if let Ok(mut f) = first.lock() {
                        f.get_or_insert(Instant::now());
                    }
                    // A dead next board drops what is sent to it, as a cut wire would.
                    let _ = to.write_all(&buf[..got]);
                    count.fetch_add(got as u64, Ordering::Relaxed);
                    peak.add(got as u64);
                    if let Ok(mut l) = last.lock() {
                        *l = now;
                    }
                }
            }));
        }
        Ok(Self {
            threads,
            bytes,
            peaks,
            first,
            last,
        })
    }

    /// Bytes per hop, each hop's most bytes in one second, and the seconds between the first
    /// byte and the last.
    fn finish(self) -> (Vec<u64>, Vec<u64>, f64) {
        for t in self.threads {
            let _ = t.join();
        }
        let secs = match (*self.first.lock().unwrap(), *self.last.lock().unwrap()) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        let bytes = self
            .bytes
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        (bytes, self.peaks.iter().map(Peak::most).collect(), secs)
    }
}

/// A hop's busiest second: bytes counted in whole seconds since the hop's first byte.
#[derive(Clone, Default)]
struct Peak(Arc<Mutex<Seconds>>);

/// The counts behind [`Peak`].
#[derive(Default)]
struct Seconds {
    start: Option<Instant>,
    /// The second being counted, its bytes so far, and the most of any second before.
    second: u64,
    bytes: u64,
    most: u64,
}

impl Peak {
    fn add(&self, n: u64) {
        let Ok(mut p) = self.0.lock() else { return };
        let start = *p.start.get_or_insert_with(Instant::now);
        let second = start.elapsed().as_secs();
        if second != p.second {
            p.most = p.most.max(p.bytes);
            p.second = second;
            p.bytes = 0;
        }
        p.bytes += n;
    }

    fn most(&self) -> u64 {
        self.0.lock().map(|p| p.most.max(p.bytes)).unwrap_or(0)
    }
}
