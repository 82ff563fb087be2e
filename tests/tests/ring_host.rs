//! A ring of boards on the host: the runtime's whole run on a thread per board, each over its own
//! card (a RAM disk whose `lmboot.txt` says `ring = K/N`), wired by the link layer's fake serial
//! lines. The head prints exactly what one board prints (the hidden states cross the ring as f32);
//! so it does on lossy, corrupting lines; a board cut out of the ring mid-run ends the head's run
//! with an error naming it; boards with different models or ring sizes are refused by name.

mod common;

use drivers::block::RamDisk;
use ring::fake::{self, FakeLink, Faults};
use runtime::console::Console;
use runtime::platform::Host;
use runtime::run::{run, BEGIN_OUTPUT, END_OUTPUT};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A console the test can watch while the run goes on, and what is typed on it.
#[derive(Clone, Default)]
struct Shared(
    Arc<Mutex<Vec<u8>>>,
    Arc<Mutex<std::collections::VecDeque<u8>>>,
);
impl Console for Shared {
    fn write_bytes(&mut self, b: &[u8]) {
        self.0.lock().unwrap().extend_from_slice(b);
    }
    fn read_byte(&mut self) -> Option<u8> {
        self.1.lock().unwrap().pop_front()
    }
}
impl Shared {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn settings(n: usize) -> xtask::Settings {
    xtask::Settings {
        prompt: "The ring of boards passed the hidden states around, and".into(),
        n,
        ..Default::default()
    }
}

/// A card image in memory: `lmboot.txt` for `s` plus `extra` lines, and `model`.
fn card(s: &xtask::Settings, extra: &[(&str, String)], model: &Path, name: &str) -> Vec<u8> {
    let mut s = s.clone();
    s.extra
        .extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    // Tests run in parallel: every image gets a name of its own.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let img =
        std::env::temp_dir().join(format!("lmboot-ring-{name}-{}-{k}.img", std::process::id()));
    let cfg = s.config_text(xtask::MODEL_ON_CARD);
    use xtask::image::Content;
    xtask::image::make_image(
        &img,
        &[
            ("lmboot.txt", Content::Bytes(cfg.as_bytes())),
            (xtask::MODEL_ON_CARD, Content::File(model)),
        ],
        0,
    )
    .unwrap();
    let bytes = std::fs::read(&img).unwrap();
    let _ = std::fs::remove_file(&img);
    bytes
}

/// Run one board on `dev` with `link` as its ring line; (result, console).
fn board(dev: Vec<u8>, link: Option<FakeLink>, con: Shared) -> Result<(), String> {
    let mut host = Host::new(1 << 30);
    if let Some(l) = link {
        host = host.with_link(Box::new(l), "a fake serial line");
    }
    let mut con = con;
    run(RamDisk::new(dev), &mut con, &host).map_err(|e| e.to_string())
}

/// Start one [`board`] thread a card, each on its link and console.
fn spawn_boards(
    cards: Vec<Vec<u8>>,
    links: &[FakeLink],
    cons: &[Shared],
) -> Vec<std::thread::JoinHandle<Result<(), String>>> {
    cards
        .into_iter()
        .zip(links.iter().cloned())
        .zip(cons.iter().cloned())
        .map(|((c, l), con)| std::thread::spawn(move || board(c, Some(l), con)))
        .collect()
}

/// Every board's result and console; board `kill.0` is cut out once the head prints `kill.1`.
fn ring(
    cards: Vec<Vec<u8>>,
    faults: Faults,
    kill: Option<(usize, &str)>,
) -> Vec<(Result<(), String>, String)> {
    let links = fake::ring(cards.len(), faults);
    let cons: Vec<Shared> = cards.iter().map(|_| Shared::default()).collect();
    let handles = spawn_boards(cards, &links, &cons);
    if let Some((b, trigger)) = kill {
        let start = Instant::now();
        while !cons[0].text().contains(trigger) && start.elapsed() < Duration::from_secs(300) {
            std::thread::sleep(Duration::from_millis(20));
        }
        links[b - 1].kill();
    }
    // After a cut, only the head is waited for: the cut board hears nothing, and the boards
    // after it no longer hear the head (its stop went through the cut board); they give up by
    // themselves after a minute.
    let joined = if kill.is_some() { 1 } else { handles.len() };
    handles
        .into_iter()
        .zip(&cons)
        .enumerate()
        .map(|(k, (h, con))| match k < joined {
            true => (h.join().unwrap(), con.text()),
            false => (Err("not waited for".to_string()), con.text()),
        })
        .collect()
}

fn generated(uart: &str) -> &str {
    let s = uart
        .find(BEGIN_OUTPUT)
        .unwrap_or_else(|| panic!("no output in:\n{uart}"))
        + BEGIN_OUTPUT.len()
        + 1;
    let e = uart[s..]
        .find(&format!("\n{END_OUTPUT}"))
        .expect("end marker");
    &uart[s..s + e]
}

/// What one board alone prints for `s`.
fn alone(s: &xtask::Settings) -> String {
    let model = common::model_path();
    let con = Shared::default();
    board(card(s, &[], &model, "alone"), None, con.clone()).unwrap();
    generated(&con.text()).to_string()
}

/// The chat's text from its first prompt to its `bye`, without timings (the `[turn ...]` lines
/// and the prefill time of a `/reset`).
fn replies(con: &str) -> String {
    let start = con
        .find("\n> ")
        .unwrap_or_else(|| panic!("no chat prompt in:\n{con}"));
    let end = con
        .find("\nbye")
        .unwrap_or_else(|| panic!("no bye in:\n{con}"));
    con[start..end]
        .lines()
        .filter(|l| !l.starts_with('['))
        .map(|l| match l.split_once("(prefilled in ") {
            Some((a, b)) => format!("{a}({}", b.split_once(" ms)").map_or(b, |x| x.1)),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ring_cards(s: &xtask::Settings, n: usize, model: &Path) -> Vec<Vec<u8>> {
    (1..=n)
        .map(|k| {
            card(
                s,
                &[("ring", format!("{k}/{n}")), ("batch", "7".into())],
                model,
                &format!("{k}"),
            )
        })
        .collect()
}

/// A ring of `n` boards for `s` on lines with `faults`: every board ends well and the head prints
/// `want`. Every board's result and console.
fn ring_prints(
    s: &xtask::Settings,
    n: usize,
    faults: Faults,
    want: &str,
) -> Vec<(Result<(), String>, String)> {
    let out = ring(ring_cards(s, n, &common::model_path()), faults, None);
    for (k, (r, con)) in out.iter().enumerate() {
        assert!(r.is_ok(), "board {} of {n}: {r:?}\n{con}", k + 1);
    }
    assert_eq!(
        generated(&out[0].1),
        want,
        "{n} boards, {faults:?}:\n{}",
        out[0].1
    );
    out
}

/// Two and three boards print what one prints, on clean lines, on lines that lose, flip and
/// swap, and on lines that carry garbage, cut frames and old frames; the head names each board's
/// window.
#[test]
fn a_ring_prints_what_one_board_prints() {
    let s = settings(12);
    let want = alone(&s);
    let lossy = Faults {
        seed: 7,
        drop_per_million: 20,
        flip_per_million: 10,
        reorder_per_million: 20_000,
        capacity: 0,
        ..Faults::default()
    };
    // Garbage between frames, frames cut short, and frames sent again from far back.
    let hostile = Faults {
        seed: 8,
        garbage_per_million: 20_000,
        truncate_per_million: 5_000,
        replay_per_million: 20_000,
        replay_memory: 1000,
        ..Faults::default()
    };
    let cases = [
        (2, Faults::default()),
        (3, Faults::default()),
        (2, lossy),
        (3, hostile),
    ];
    for (n, faults) in cases {
        let t0 = Instant::now();
        let out = ring_prints(&s, n, faults, &want);
        let head = &out[0].1;
        assert!(
            head.contains(&format!("ring: board {n} runs layers")),
            "{head}"
        );
        assert!(
            out[n - 1].1.contains("ring: serving layers"),
            "{}",
            out[n - 1].1
        );
        eprintln!("{n} boards, {faults:?}: {:?}", t0.elapsed());
    }
}

/// A board cut out of the ring while tokens are being generated: the head stops with an error
/// naming it, in bounded time, and the other boards stop too.
#[test]
fn a_board_that_stops_answering_is_named() {
    let s = settings(400);
    let model = common::model_path();
    for dead in [2, 3] {
        let t0 = Instant::now();
        let out = ring(
            ring_cards(&s, 3, &model),
            Faults::default(),
            Some((dead, BEGIN_OUTPUT)),
        );
        let (r, head) = &out[0];
        let e = r.as_ref().expect_err("the head must fail");
        assert!(
            e.contains(&format!("board {dead} stopped answering")),
            "{e}\n{head}"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "{:?}",
            t0.elapsed()
        );
    }
}

/// A board holding another model, and a board whose `lmboot.txt` says a different ring size,
/// are refused by name before anything runs.
#[test]
fn mismatched_boards_are_refused() {
    let s = settings(4);
    let model = common::model_path();
    let mut cards = ring_cards(&s, 2, &model);
    let other = common::named_model("gemma-3-270m");
    cards[1] = card(&s, &[("ring", "2/2".into())], &other, "other");
    let out = ring(cards, Faults::default(), None);
    let e = out[0].0.as_ref().expect_err("a different model");
    assert!(
        e.contains("board 2") && e.contains("different model"),
        "{e}"
    );
    let mut cards = ring_cards(&s, 3, &model);
    cards[2] = card(&s, &[("ring", "3/4".into())], &model, "four");
    let out = ring(cards, Faults::default(), None);
    let e = out[0].0.as_ref().expect_err("a different ring size");
    assert!(e.contains("board 3") && e.contains("ring = 3/4"), "{e}");
}

/// Boards wired in the wrong order (places 1, 3, 2 round the wire): the head says so, naming the
/// board it heard where another should be, and every board stops.
#[test]
fn a_misordered_ring_is_refused() {
    let s = settings(4);
    let model = common::model_path();
    let cards: Vec<Vec<u8>> = [1, 3, 2]
        .iter()
        .map(|k| {
            card(
                &s,
                &[("ring", format!("{k}/3"))],
                &model,
                &format!("mis{k}"),
            )
        })
        .collect();
    let out = ring(cards, Faults::default(), None);
    let e = out[0].0.as_ref().expect_err("a misordered ring");
    assert!(e.contains("wrong order"), "{e}");
    assert!(out.iter().all(|(r, _)| r.is_err()), "{out:?}");
}

/// Chat on a ring: two turns, a `/reset` (positions start again on every board) and a third
/// turn, typed on the head's console, read exactly as one board alone answers them.
#[test]
fn a_ring_chats_as_one_board_does() {
    let mut s = settings(24);
    s.extra.push(("mode".into(), "chat".into()));
    let model = common::model_path();
    let typed = b"What is the capital of France?\rAnd of Italy?\r/reset\rName a colour.\r\x04";
    let con = Shared::default();
    con.1.lock().unwrap().extend(typed.iter());
    board(card(&s, &[], &model, "chat-alone"), None, con.clone()).unwrap();
    let want = replies(&con.text());
    let cards = ring_cards(&s, 3, &model);
    let links = fake::ring(3, Faults::default());
    let cons: Vec<Shared> = (0..3).map(|_| Shared::default()).collect();
    cons[0].1.lock().unwrap().extend(typed.iter());
    let handles = spawn_boards(cards, &links, &cons);
    for (k, h) in handles.into_iter().enumerate() {
        let r = h.join().unwrap();
        assert!(r.is_ok(), "board {}: {r:?}\n{}", k + 1, cons[k].text());
    }
    let got = replies(&cons[0].text());
    assert!(want.contains("Name a colour."), "{want}");
    assert_eq!(got, want, "the ring's chat and one board's differ");
}

/// The cards of a ring with one board per entry of `caches`, each with that `cache =` setting.
fn cards_with_caches(
    s: &xtask::Settings,
    caches: &[&str],
    model: &Path,
    name: &str,
) -> Vec<Vec<u8>> {
    let n = caches.len();
    (1..=n)
        .zip(caches)
        .map(|(k, cache)| {
            let s = xtask::Settings {
                cache: cache.to_string(),
                ..s.clone()
            };
            let extra = [("ring", format!("{k}/{n}"))];
            card(&s, &extra, model, &format!("{name}{k}"))
        })
        .collect()
}

/// Boards whose page cache is smaller than their window stream the rest of it from their cards,
/// as a board alone streams a model larger than its RAM, and the tokens stay the same.
#[test]
fn ring_boards_that_stream_their_window_print_the_same() {
    let s = settings(6);
    let want = alone(&s);
    let model = common::model_path();
    // The head's cache holds less than its window. Board 2's pins at most 1 MiB (3 MiB less its
    // 8-page window), less than any one layer (2.1 MiB), so it streams whatever window the split
    // (made from measured, timing-dependent rates) gives it.
    let cards = cards_with_caches(&s, &["24M", "3M"], &model, "stream");
    let out = ring(cards, Faults::default(), None);
    for (k, (r, con)) in out.iter().enumerate() {
        assert!(r.is_ok(), "board {}: {r:?}\n{con}", k + 1);
    }
    let head = &out[0].1;
    assert_eq!(generated(head), want, "{head}");
    let streamed = head
        .lines()
        .find(|l| l.starts_with("ring: board 2 ready"))
        .unwrap_or_else(|| panic!("no ready line in:\n{head}"));
    assert!(!streamed.contains(" 0 MiB streamed"), "{streamed}");
}

/// A board whose window cannot be loaded (its cache is smaller than the page cache's least
/// window) tells the head why, and the head ends the run naming it instead of waiting for its
/// ready.
#[test]
fn a_board_that_cannot_load_its_window_is_named() {
    let s = settings(4);
    let model = common::model_path();
    let cards = cards_with_caches(&s, &["auto", "1M"], &model, "noroom");
    let start = Instant::now();
    let out = ring(cards, Faults::default(), None);
    let (head, board2) = (&out[0], &out[1]);
    let e = head.0.as_ref().expect_err("the head's run should fail");
    assert!(e.contains("board 2 gave up"), "{e}\n{}", head.1);
    assert!(
        e.contains("cache = 1024 KiB is too small"),
        "no cause named: {e}"
    );
    assert!(board2.0.is_err(), "{}", board2.1);
    assert!(
        start.elapsed() < Duration::from_secs(240),
        "{:?}",
        start.elapsed()
    );
}

/// A ring whose head speculates (lookup and a self-draft of its first layers, the checking pass
/// round the ring with every row coming back, trees of candidates with their shape and the path
/// kept) prints what one board prints without speculation, on clean and lossy lines, and says
/// how many tokens each pass gave.
#[test]
fn a_speculating_ring_prints_what_one_board_prints() {
    let mut s = settings(24);
    // "one two" goes on two ways: lookup's guesses branch where they part.
    s.prompt =
        "red one two three red one two four red one two three red one two four red one two".into();
    let want = alone(&s);
    s.spec = vec![
        ("--lookup", "2".into()),
        ("--self-draft", "2".into()),
        ("--speculate", "6".into()),
    ];
    let lossy = Faults {
        seed: 11,
        drop_per_million: 20,
        flip_per_million: 10,
        reorder_per_million: 20_000,
        capacity: 0,
        ..Faults::default()
    };
    for (n, faults) in [(2, Faults::default()), (3, lossy)] {
        let out = ring_prints(&s, n, faults, &want);
        let head = &out[0].1;
        // The self-draft is as deep as the head's own layers allow (the split decides them).
        let said = "ring: the head speculates, lookup, its first ";
        assert!(head.contains(said), "{head}");
        let line = head
            .lines()
            .find(|l| l.starts_with("speculation: "))
            .unwrap_or_else(|| panic!("no speculation line:\n{head}"));
        let per_pass: f64 = line["speculation: ".len()..]
            .split(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!(per_pass > 1.0, "{line}");
        // Some checking passes were trees: their shape and the paths kept crossed the ring.
        assert!(line.contains(" branched)"), "{line}");
    }
}
