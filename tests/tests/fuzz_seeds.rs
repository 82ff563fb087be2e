//! Seed inputs for the fuzz targets whose inputs the repository's own code writes: frames and
//! messages as the ring endpoints put them on a line, a prompt-cache file as `save_parts` writes
//! it, the CID, CSD and CMD6 blocks of the SD card simulator, keystroke transcripts of chat
//! sessions, and JSON documents as token ids. Each seed runs through its target's body here
//! (within the target's allocation bound); with `LMBOOT_FUZZ_SEEDS=<dir>` they are also written to
//! `<dir>/<target>/`, which is how `cargo xtask fuzz` seeds those corpora.

#[path = "../../fuzz/bodies/mod.rs"]
mod bodies;
#[path = "sd_card_sim/mod.rs"]
#[allow(unused)]
mod sd_card_sim;

use bodies::promptcache::{self as pcb, MemFile};
use inference::kv::KvCache;
use ring::endpoint::{Endpoint, Timing};
use ring::fake::{self, FakeLink, Faults};
use ring::link::Link;
use runtime::promptcache::{self as pc, LoadOutcome};
use runtime::ring::msg::Msg;
use runtime::ring::plan::Profile;
use sd_card_sim::{Backing, Card, CardSpec, Kind};

/// Named seed inputs of one target.
type Seeds = Vec<(String, Vec<u8>)>;

/// What makes a target's seeds.
type MakeSeeds = fn() -> Seeds;

/// A link that keeps a copy of every byte it receives.
#[derive(Debug)]
struct Tap {
    link: FakeLink,
    heard: Vec<u8>,
}

impl Link for Tap {
    fn send(&mut self, bytes: &[u8]) -> usize {
        self.link.send(bytes)
    }

    fn recv(&mut self, buf: &mut [u8]) -> usize {
        let n = self.link.recv(buf);
        self.heard.extend_from_slice(&buf[..n]);
        n
    }
}

/// The messages of a short run between two boards.
fn conversation() -> Vec<Vec<u8>> {
    let acts: Vec<u8> = (0..64u32)
        .flat_map(|i| (i as f32 * 0.25).to_le_bytes())
        .collect();
    [
        Msg::Hello {
            board: 2,
            boards: 2,
            model_key: 0x1234_5678_9abc_def0,
            profile: Profile {
                ram: 512 << 20,
                cache: 64 << 20,
                compute: 300 << 20,
                card: 20 << 20,
                cores: 4,
            },
        },
        Msg::Assign {
            starts: vec![0, 15],
            ctx: 512,
            batch: 16,
            silent_ms: 2000,
        },
        Msg::Ready {
            board: 2,
            pinned: 60 << 20,
            streamed: 0,
        },
        Msg::Acts {
            pos: 0,
            rows: 1,
            back: 1,
            chunk: 0,
            bytes: &acts,
            parents: &[],
            kept_at: 0,
            kept: &[],
        },
        Msg::Last {
            pos: 0,
            chunk: 0,
            bytes: &acts[..128],
        },
        Msg::Done { pos: 1 },
        Msg::Beat {
            board: 2,
            upstream_quiet_ms: 3,
        },
        Msg::Fault {
            board: 2,
            what: "card read failed",
        },
        Msg::Stop,
    ]
    .iter()
    .map(Msg::encode)
    .collect()
}

/// What board 2 of a ring of two hears while board 1 sends it the conversation, and what it
/// delivered.
fn ring_traffic() -> (Vec<u8>, usize) {
    let mut links = fake::ring(2, Faults::default()).into_iter();
    let (l1, l2) = (links.next().unwrap(), links.next().unwrap());
    let mut b1 = Endpoint::new(1, 2, l1, Timing::default());
    let mut b2 = Endpoint::new(
        2,
        2,
        Tap {
            link: l2,
            heard: vec![],
        },
        Timing::default(),
    );
    for m in conversation() {
        b1.try_send(2, &m)
            .expect("the window holds the conversation");
    }
    b1.send_datagram(
        2,
        &Msg::Beat {
            board: 1,
            upstream_quiet_ms: 0,
        }
        .encode(),
    )
    .unwrap();
    let mut delivered = 0;
    for step in 0..50u64 {
        let now = step * 1_000_000;
        b1.pump(now).unwrap();
        b2.pump(now).unwrap();
        while b2.recv().is_some() {
            delivered += 1;
        }
    }
    (std::mem::take(&mut b2.link_mut().heard), delivered)
}

/// The ring target's input for board 2 of 2 (the place byte) hearing `wire` in raw chunks.
fn ring_input(wire: &[u8]) -> Vec<u8> {
    // boards = 2 + 28 % 7 = 2, me = 1 + (28 >> 4) % 2 = 2.
    let mut v = vec![28u8];
    for c in wire.chunks(255) {
        v.extend_from_slice(&[0, c.len() as u8]);
        v.extend_from_slice(c);
        v.extend_from_slice(&[3, 4]); // a pump 1 ms later
    }
    v
}

fn ring_seeds() -> Seeds {
    let (wire, delivered) = ring_traffic();
    assert_eq!(
        delivered,
        conversation().len(),
        "board 2 got the whole conversation"
    );
    vec![
        ("board2-heard".into(), ring_input(&wire)),
        ("raw-wire".into(), wire),
    ]
}

fn promptcache_seeds() -> Seeds {
    let n = 5;
    let tokens: Vec<u32> = vec![1, 9906, 11, 1917, 0];
    let logits: Vec<f32> = (0..pcb::VOCAB).map(|i| i as f32 - 3.5).collect();
    let mut kv = KvCache::new(pcb::LAYERS, pcb::CTX, pcb::KV_DIM);
    for (i, x) in kv.k.iter_mut().chain(kv.v.iter_mut()).enumerate() {
        *x = half_bits(i);
    }
    let mut file = MemFile(vec![0; pcb::layout().file_bytes(n as u64) as usize]);
    pc::save_parts(&mut file, pcb::KEY, &tokens, &kv, n, &logits).expect("saved");
    let mut kv2 = KvCache::new(pcb::LAYERS, pcb::CTX, pcb::KV_DIM);
    let mut l2 = vec![0f32; pcb::VOCAB];
    let got = pc::load_parts(&mut file, pcb::KEY, &tokens, &mut kv2, &mut l2);
    assert!(
        matches!(got, Ok(LoadOutcome::Restored { tokens: 5, .. })),
        "{got:?}"
    );
    let mut seeds = vec![];
    for fix in [0u8, 7] {
        let mut v = vec![fix];
        v.extend_from_slice(&file.0);
        seeds.push((format!("saved-fix{fix}"), v));
    }
    seeds
}

/// Some f16 bit patterns (small values of both signs).
fn half_bits(i: usize) -> u16 {
    0x3C00 ^ (i as u16 * 0x111) & 0x83FF
}

fn sdregs_seeds() -> Seeds {
    let mut seeds = vec![];
    for (name, kind, blocks, uhs) in [
        ("sdhc-32g-uhs", Kind::Sdhc, 64 << 20, true),
        ("sdhc-1g-hs", Kind::Sdhc, 2 << 20, false),
        ("sdsc-v2-64m", Kind::SdscV2, 128 << 10, false),
        ("sdsc-v1-16m", Kind::SdscV1, 32 << 10, false),
    ] {
        let mut spec = CardSpec::new(kind, Backing::Pattern { blocks });
        spec.uhs = uhs;
        let mut card = Card::new(spec, false, false);
        card.signal_1v8 = uhs;
        let mut v = sd_card_sim::make_cid().to_vec();
        v.extend_from_slice(&sd_card_sim::make_csd(kind, blocks));
        // CMD6 in check mode for SDR104 (or High Speed) in group 1, the others unchanged.
        v.extend_from_slice(&card.switch_function(0x00FF_FFF0 | if uhs { 3 } else { 1 }));
        v.push(0x1F);
        seeds.push((name.into(), v));
    }
    seeds
}

fn chat_seeds() -> Seeds {
    let sessions: [(&str, u8, &[u8]); 6] = [
        ("hello", 0xF8, b"Hello there!\rWhat is 2+2?\r\x04"),
        ("commands", 0xF8, b"/help\r/temp 0.7\r/json on\r/stats\r/reset\r/TEMP 3\r/json maybe\r/nope\r//etc/passwd\r"),
        ("editing", 0xF9, b"helo\x08\x08llo wrold\x17world\r\x15gone\x03again\x7f\x7fin\r\n"),
        ("escapes", 0xFA, b"left\x1b[Dright\x1b[C\x1bOA up\x1b[1;5A\x1b[200~pasted\x1b[201~\r"),
        ("utf8", 0xFB, "caf\u{e9} \u{4f60}\u{597d} \u{1f600}\r\u{e9}\u{e9}\x08\r".as_bytes()),
        ("full-line", 0x0C, b"0123456789abcdef-too-long-for-the-line\r"),
    ];
    sessions
        .iter()
        .map(|(name, sel, keys)| {
            let mut v = vec![*sel];
            v.extend_from_slice(keys);
            (name.to_string(), v)
        })
        .collect()
}

/// `doc` as the json target's words: tokens of the constraint's vocabulary, longest first.
fn json_words(doc: &str) -> Vec<u8> {
    let c = bodies::json::build();
    let mut out = vec![];
    let mut rest = doc.as_bytes();
    while !rest.is_empty() {
        let t = (0..bodies::json::VOCAB as u32)
            .filter(|&t| !c.token_bytes(t).is_empty() && rest.starts_with(c.token_bytes(t)))
            .max_by_key(|&t| c.token_bytes(t).len())
            .expect("every byte is a token");
        rest = &rest[c.token_bytes(t).len()..];
        out.extend_from_slice(&(t as u16).to_le_bytes());
    }
    out.extend_from_slice(&(bodies::json::VOCAB as u16).to_le_bytes());
    out
}

fn json_seeds() -> Seeds {
    let docs = [
        (
            "object",
            r#"{"name": "lmboot", "boards": [1, 2, 3], "ok": true, "note": null}"#,
        ),
        (
            "numbers",
            "[0, -1, 2.5, 1e10, -3.25E-2, 12345678901234567890]",
        ),
        (
            "strings",
            r#"["caf\u00e9", "tab\tquote\"", "\ud83d\ude00", "é€😀"]"#,
        ),
        ("nested", r#"{"a": {"b": {"c": [[[{}]]]}}}"#),
        ("scalar", "  42  "),
    ];
    let mut seeds: Vec<(String, Vec<u8>)> = docs
        .iter()
        .map(|(n, d)| (n.to_string(), json_words(d)))
        .collect();
    // Drawing one-byte tokens the automaton takes, and a full mask.
    seeds.push(("draws".into(), [0x00u8, 0x80].repeat(40)));
    let mut masks = [0x07u8, 0x80].repeat(20);
    masks.extend_from_slice(&[0x00, 0xC0, 0x11, 0xFE]);
    seeds.push(("masks".into(), masks));
    seeds
}

#[test]
fn fuzz_seeds_run_through_their_targets() {
    std::env::set_var("LMBOOT_SHARED", xtask::shared_dir());
    let out = std::env::var_os("LMBOOT_FUZZ_SEEDS").map(std::path::PathBuf::from);
    let sets: [(&str, MakeSeeds); 5] = [
        ("ring", ring_seeds),
        ("promptcache", promptcache_seeds),
        ("sdregs", sdregs_seeds),
        ("chat", chat_seeds),
        ("json", json_seeds),
    ];
    for (target, make) in sets {
        let run = bodies::TARGETS
            .iter()
            .find(|t| t.0 == target)
            .expect("a target")
            .1;
        for (name, data) in make() {
            run(&data);
            if let Some(dir) = &out {
                let dir = dir.join(target);
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join(&name), &data).unwrap();
            }
        }
    }
}
