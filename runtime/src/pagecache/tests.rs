use super::*;

/// A file in memory that counts the bytes read from it.
struct Mem {
    data: Vec<u8>,
    bytes: alloc::sync::Arc<AtomicU64>,
}
impl Mem {
    /// `data`, with a fresh byte counter.
    fn new(data: Vec<u8>) -> Mem {
        Mem {
            data,
            bytes: Default::default(),
        }
    }
}
impl FileSource for Mem {
    type Error = &'static str;
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), &'static str> {
        let s = offset as usize;
        let src = self.data.get(s..s + buf.len()).ok_or("read past the end")?;
        buf.copy_from_slice(src);
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

fn data(n: usize) -> Vec<u8> {
    let mut x = 0x1234_5678u32;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

#[test]
fn whole_file_resident_reads_in_place() {
    let d = data(10_000);
    let mut calls = vec![];
    let c = PageCache::new(Mem::new(d.clone()), 1 << 20, 4096, &mut |a, b| {
        calls.push((a, b))
    })
    .unwrap();
    assert_eq!(
        calls,
        vec![(4096, 10_000), (8192, 10_000), (10_000, 10_000)]
    );
    assert_eq!(c.resident(100, 5000).unwrap(), &d[100..5100]);
    let mut b = vec![0; 3000];
    c.read_at(9000, &mut b[..1000]).unwrap();
    assert_eq!(&b[..1000], &d[9000..]);
    assert!(c.read_at(9001, &mut b[..1000]).is_err());
    assert_eq!(c.stats().bytes_read, 10_000);
    assert_eq!(c.stats().misses, 0);
}

/// Reads that cross page boundaries and the resident/streamed boundary equal direct reads, and
/// the counters add up.
#[test]
fn streamed_reads_equal_direct_reads() {
    let page = 1024;
    let d = data(64 * page + 300);
    // Room for 20 pages: 12 resident, 8 streamed.
    let src = Mem::new(d.clone());
    let counted = src.bytes.clone();
    let c = PageCache::new(src, 20 * page as u64, page, &mut |_, _| {}).unwrap();
    assert_eq!(c.resident_bytes(), 12 * page as u64);
    assert!(c.resident(0, 12 * page).is_some());
    assert!(c.resident(12 * page as u64 - 1, 2).is_none());
    let mut x = 99u64;
    for _ in 0..2000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let off = (x >> 33) % d.len() as u64;
        let n = ((x >> 13) % 5000) as usize;
        let n = n.min(d.len() - off as usize);
        let mut b = vec![0u8; n];
        c.read_at(off, &mut b).unwrap();
        assert_eq!(
            b,
            &d[off as usize..off as usize + n],
            "offset {off} len {n}"
        );
    }
    let s = c.stats();
    assert!(s.misses > 0 && s.refills > 0 && s.hits > 0);
    // The counter is what the source saw; every miss read at most one page.
    assert_eq!(s.bytes_read, counted.load(Ordering::Relaxed));
    assert!(s.bytes_read <= 12 * page as u64 + s.misses * page as u64);
    assert_eq!(s.refills, s.misses - 8);
}

#[test]
fn bad_sizes_and_failing_sources_are_errors() {
    let mk = || Mem::new(data(100_000));
    assert!(matches!(
        PageCache::new(mk(), 1 << 20, 0, &mut |_, _| {}),
        Err(CacheError::BadSize { .. })
    ));
    assert!(matches!(
        PageCache::new(mk(), 1 << 20, 1000, &mut |_, _| {}),
        Err(CacheError::BadSize { .. })
    ));
    let small = PageCache::new(mk(), 4096, 1024, &mut |_, _| {}).unwrap_err();
    assert_eq!(
        small,
        CacheError::TooSmall {
            capacity: 4096,
            least: 9 * 1024,
            page: 1024
        }
    );
    assert!(
        small
            .to_string()
            .contains("at least 9 KiB (9 pages of 1 KiB"),
        "{small}"
    );
    struct Broken;
    impl FileSource for Broken {
        type Error = &'static str;
        fn len(&self) -> u64 {
            4096
        }
        fn read(&mut self, _: u64, _: &mut [u8]) -> Result<(), &'static str> {
            Err("card removed")
        }
    }
    let e = PageCache::new(Broken, 1 << 20, 1024, &mut |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("card removed"));
}

/// A source with a request queue: reads start, and finish only when polled (every other poll,
/// oldest first), so the cache really has reads in flight. Every `fail_every`-th queued read
/// fails (the cache must then read the page again synchronously).
struct Queued {
    mem: Mem,
    queue: alloc::collections::VecDeque<PageRead>,
    polls: u64,
    started: u64,
    fail_every: u64,
    max_in_flight: usize,
}
impl FileSource for Queued {
    type Error = &'static str;
    fn len(&self) -> u64 {
        self.mem.len()
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), &'static str> {
        self.mem.read(offset, buf)
    }
    fn queue_depth(&self) -> usize {
        16
    }
    unsafe fn start(&mut self, r: PageRead) -> Result<bool, &'static str> {
        assert_eq!(r.offset % 512, 0);
        self.queue.push_back(r);
        self.max_in_flight = self.max_in_flight.max(self.queue.len());
        Ok(false)
    }
    fn poll(&mut self) -> Option<(u32, Result<(), &'static str>)> {
        self.polls += 1;
        if self.polls.is_multiple_of(2) {
            return None;
        }
        let r = self.queue.pop_front()?;
        self.started += 1;
        if self.fail_every > 0 && self.started.is_multiple_of(self.fail_every) {
            return Some((r.tag, Err("injected queued-read failure")));
        }
        // SAFETY: the cache keeps the slot untouched while the read is queued.
        Some((r.tag, self.mem.read(r.offset, unsafe { r.buf() })))
    }
}

/// With read-ahead on a queued source: reads equal direct reads, whatever is announced (right,
/// wrong or stale hints) and with some queued reads failing; announced pages are read ahead
/// and found ready; nothing is left in flight.
#[test]
fn read_ahead_returns_the_same_bytes_and_hides_the_reads() {
    let page = 1024;
    let d = data(64 * page + 300);
    let mem = Mem::new(d.clone());
    let counted = mem.bytes.clone();
    let src = Queued {
        mem,
        queue: Default::default(),
        polls: 0,
        started: 0,
        fail_every: 7,
        max_in_flight: 0,
    };
    let opts = Options {
        policy: Policy::ResidentPrefix,
        readahead: 4,
    };
    let c = PageCache::with_options(src, 24 * page as u64, page, opts, &mut |_, _| {}).unwrap();
    assert_eq!(c.readahead(), 4);
    assert_eq!(c.resident_bytes(), 12 * page as u64);
    // A sequential scan of the streamed part, announcing the next 3 pages before each read:
    // most pages are read ahead.
    crate::testutil::scan_with_hints(&c, &d, page, 12);
    let s = c.stats();
    assert!(s.prefetched >= 40, "{s:?}");
    assert!(s.misses <= 12, "{s:?}");
    // Random reads with random hints.
    crate::testutil::random_reads(&c, &d, 7, 3000, 3);
    let w = c.window.lock();
    assert!(
        w.src.max_in_flight <= 4,
        "in flight {}",
        w.src.max_in_flight
    );
    drop(w);
    // Failed queued reads were counted when issued but never delivered.
    let s = c.stats();
    assert!(s.bytes_read >= counted.load(Ordering::Relaxed), "{s:?}");
    // Dropping the cache waits for the reads still in flight.
    drop(c);
}

/// A source without a queue never reads ahead, whatever is asked.
#[test]
fn synchronous_sources_do_not_read_ahead() {
    let page = 1024;
    let src = Mem::new(data(64 * page));
    let c = PageCache::with_options(
        src,
        24 * page as u64,
        page,
        Options::default(),
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(c.readahead(), 0);
    c.prefetch(30 * page as u64, 8 * page as u64);
    assert_eq!(c.stats().prefetched, 0);
    assert_eq!(c.stats().bytes_read, c.resident_bytes());
    assert!(matches!(
        PageCache::with_options(
            Mem::new(data(100)),
            1 << 20,
            1024,
            Options {
                policy: Policy::ResidentPrefix,
                readahead: MAX_READAHEAD + 1
            },
            &mut |_, _| {}
        ),
        Err(CacheError::BadSize { .. })
    ));
}

/// With the read order known (`set_schedule`), eviction keeps the pages needed soonest: on a
/// cyclic read of 28 streamed pages through an 8-page window, each cycle reads about 28 − 7 pages
/// (the window keeps seven across cycles), where without it every cycle reads all 28 and the page
/// two tensors share twice. The bytes read are the file's bytes either way.
#[test]
fn a_known_read_order_keeps_the_pages_needed_soonest() {
    let page = 1024usize;
    let d = data(40 * page);
    // Three "tensors" in the streamed part (pages 12..40), in file order A, B, C; A and B share
    // page 20. The pass reads B, C, A.
    let (a, b, c) = (
        12 * page..20 * page + 500,
        20 * page + 500..30 * page,
        30 * page..40 * page,
    );
    let order = [b.clone(), c.clone(), a.clone()];
    let per_cycle = |schedule: bool| {
        let src = Mem::new(d.clone());
        let bytes = src.bytes.clone();
        let opts = Options {
            policy: Policy::ResidentPrefix,
            readahead: 0,
        };
        let cache =
            PageCache::with_options(src, 20 * page as u64, page, opts, &mut |_, _| {}).unwrap();
        assert_eq!(cache.resident_bytes(), 12 * page as u64);
        if schedule {
            cache.set_schedule(order.iter().map(|r| (r.start as u64, r.len() as u64)), 1);
        }
        let mut buf = vec![0u8; 256];
        let mut cycle = || {
            for r in &order {
                for at in r.clone().step_by(256) {
                    let n = 256.min(r.end - at);
                    cache.read_at(at as u64, &mut buf[..n]).unwrap();
                    assert_eq!(&buf[..n], &d[at..at + n]);
                }
            }
        };
        cycle();
        let before = bytes.load(Ordering::Relaxed);
        for _ in 0..3 {
            cycle();
        }
        (bytes.load(Ordering::Relaxed) - before) / 3
    };
    let (with, without) = (per_cycle(true), per_cycle(false));
    std::eprintln!("bytes per cycle: {with} with the read order, {without} without");
    assert!(
        with <= 22 * page as u64,
        "with the read order: {with} bytes per cycle"
    );
    assert!(
        without >= 28 * page as u64,
        "without: {without} bytes per cycle"
    );
}

/// Pinning plans: wanted ranges widened to pages, taken in order while the budget lasts, the
/// repeats skipped, and the runs sorted and merged.
#[test]
fn pin_plan_takes_wanted_ranges_in_order() {
    let plan = |w: &[(u64, u64)], len, page, budget| pinned::plan(w, len, page, budget).unwrap();
    // Two ranges, in reverse file order; both fit.
    assert_eq!(
        plan(&[(5000, 100), (100, 1000)], 10_000, 1024, 1 << 20),
        vec![(0, 2048), (4096, 1024)]
    );
    // The budget cuts the second range to whole pages; a repeat of the first is skipped.
    assert_eq!(
        plan(
            &[(0, 3000), (0, 3000), (8192, 5000)],
            20_000,
            1024,
            5 * 1024
        ),
        vec![(0, 3072), (8192, 2048)]
    );
    // Adjacent runs merge, and the last page stops at the file's end.
    assert_eq!(
        plan(
            &[(1024, 1024), (0, 1024), (2048, 9000)],
            2500,
            1024,
            1 << 20
        ),
        vec![(0, 2500)]
    );
    assert!(plan(&[(0, 100)], 10_000, 1024, 1000).is_empty());
}

/// A reader of some ranges (a ring board): those ranges are pinned wherever they lie, reads that
/// cross pinned and streamed stretches equal direct reads, and reading the wanted ranges again
/// costs no device reads.
#[test]
fn wanted_ranges_are_pinned_wherever_they_lie() {
    let page = 1024;
    let d = data(64 * page + 300);
    let src = Mem::new(d.clone());
    let counted = src.bytes.clone();
    let wanted = [
        (40 * page as u64 + 10, 6 * page as u64),
        (3 * page as u64, 2000),
    ];
    let opts = Options::default();
    let c =
        PageCache::for_ranges(src, 30 * page as u64, page, opts, &wanted, &mut |_, _| {}).unwrap();
    assert_eq!(c.resident_bytes(), 7 * page as u64 + 2 * page as u64);
    assert!(c.resident(40 * page as u64, 7 * page).is_some());
    assert!(c.resident(3 * page as u64, 2 * page).is_some());
    assert!(c.resident(5 * page as u64 - 1, 2).is_none());
    let loaded = counted.load(Ordering::Relaxed);
    let mut b = vec![0u8; 6 * page];
    c.read_at(40 * page as u64 + 10, &mut b).unwrap();
    assert_eq!(
        counted.load(Ordering::Relaxed),
        loaded,
        "a pinned range read the device"
    );
    for (off, n) in [
        (0, 64 * page + 300),
        (2 * page + 7, 5000),
        (39 * page, 9 * page),
    ] {
        let mut b = vec![0u8; n];
        c.read_at(off as u64, &mut b).unwrap();
        assert_eq!(b, &d[off..off + n], "offset {off} len {n}");
    }
}

/// A 6 GiB file that holds nothing: each byte is made from its offset, high bits included, so a
/// read at an offset cut to 32 bits returns other bytes.
struct Far;
const FAR_LEN: u64 = 6 << 30;
fn far_byte(o: u64) -> u8 {
    let x = (o >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> (56 - (o & 7) * 8)) as u8
}
fn far_bytes(offset: u64, len: usize) -> Vec<u8> {
    (offset..offset + len as u64).map(far_byte).collect()
}
impl FileSource for Far {
    type Error = &'static str;
    fn len(&self) -> u64 {
        FAR_LEN
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), &'static str> {
        if offset + buf.len() as u64 > FAR_LEN {
            return Err("read past the end");
        }
        buf.copy_from_slice(&far_bytes(offset, buf.len()));
        Ok(())
    }
}

#[test]
fn offsets_past_4_gib_stream_and_pin() {
    const G: u64 = 1 << 30;
    assert_ne!(far_bytes(4 * G, 64), far_bytes(0, 64));
    // Streamed through a 1 MiB cache: across the 4 GiB line, past it, at the very end.
    let c = PageCache::new(Far, 1 << 20, 4096, &mut |_, _| {}).unwrap();
    for (offset, len) in [
        (4 * G - 100, 9000),
        (4 * G, 4096),
        (5 * G + 12_345, 70_000),
        (FAR_LEN - 10, 10),
        (0, 100),
    ] {
        let mut buf = vec![0; len];
        c.read_at(offset, &mut buf).unwrap();
        assert!(buf == far_bytes(offset, len), "at {offset}");
    }
    let mut buf = [0; 11];
    assert!(c.read_at(FAR_LEN - 10, &mut buf).is_err());
    // A range wanted past 4 GiB is pinned there and read in place.
    let wanted = [(5 * G + 1000, 50_000)];
    let opts = Options {
        policy: Policy::ResidentPrefix,
        readahead: 0,
    };
    let c = PageCache::for_ranges(Far, 1 << 20, 4096, opts, &wanted, &mut |_, _| {}).unwrap();
    let run = c.resident(5 * G + 1000, 50_000).unwrap();
    assert!(run == far_bytes(5 * G + 1000, 50_000));
    assert!(c.resident(1000, 10).is_none());
}

#[test]
fn a_cache_past_a_32_bit_address_space_is_refused_up_front() {
    let limit = i32::MAX as u64;
    let e = check_fits(&[(0, 3 << 30)], 8, 4096, limit).unwrap_err();
    assert_eq!(
        e.to_string(),
        "its pinned part is 3 GiB: more than this 32-bit board can address in one piece (1.9 GiB)"
    );
    let e = check_fits(&[(0, 1 << 30)], (1 << 30) / 4096, 4096, limit).unwrap_err();
    assert!(e.to_string().starts_with("the whole is 2 GiB"), "{e}");
    let e = check_fits(&[], usize::MAX, 1 << 20, u64::MAX).unwrap_err();
    assert!(e.to_string().starts_with("its window"), "{e}");
    assert!(check_fits(&[(0, 1 << 30)], 64, 4096, limit).is_ok());
    // Least recently used over the whole 6 GiB file: the window is what must fit.
    let lru = layout(FAR_LEN, FAR_LEN, 4096, 0, Policy::Lru, &[(0, FAR_LEN)]).unwrap();
    assert!(check_fits(&lru.0, lru.1, 4096, limit).is_err());
}

/// The pin order ([`order::PinScope`]) on a model laid out like Qwen2.5's GGUF files: the header,
/// the output head (unless tied), the token embedding, then each layer's matrices in file
/// (alphabetical) order with small tensors between, everything from `base` on.
pub(crate) mod pin_order {
    use super::super::order::{pinned_within, PinReport, PinScope, Value};
    use super::*;
    use inference::gguf::TensorInfo;
    use inference::model::{Config, LayerWeights, Model, Part, RopeScaling, Weights};
    use inference::quant::GgmlType;

    const HEAD: u64 = 150_000;
    const EMBD: u64 = 100_000;
    const ROWS: u64 = 1000;
    /// Bytes of a layer's seven matrices.
    const LAYER: u64 = 114_000;

    fn t(offset: &mut u64, size: u64, rows: u64) -> TensorInfo {
        let info = TensorInfo {
            name: String::new(),
            ty: GgmlType::Q8_0,
            dims: [size / rows, rows, 1, 1],
            n_dims: 2,
            offset: *offset,
            size,
            info_offset: 0,
        };
        // A small tensor (a norm or a bias) after each matrix.
        *offset += size + 600;
        info
    }

    /// The model, its file's length and the part a board alone runs.
    pub(crate) fn model(layers: usize, tied: bool, base: u64) -> (Model, u64, Part) {
        let whole = Part::whole(layers);
        let mut at = base + 4096;
        let output = (!tied).then(|| t(&mut at, HEAD, ROWS));
        let token_embd = t(&mut at, EMBD, ROWS);
        let layers = (0..layers)
            .map(|_| {
                // File order: ffn_down, ffn_gate, ffn_up, attn_k, attn_output, attn_q, attn_v.
                let [w_down, w_gate, w_up, wk, wo, wq, wv] =
                    [30_000, 30_000, 30_000, 2_000, 10_000, 10_000, 2_000]
                        .map(|n| t(&mut at, n, 100));
                LayerWeights {
                    attn_norm: vec![],
                    wq,
                    wk,
                    wv,
                    bq: None,
                    bk: None,
                    bv: None,
                    q_norm: None,
                    k_norm: None,
                    wo,
                    post_attn_norm: None,
                    ffn_norm: vec![],
                    w_gate,
                    w_up,
                    w_down,
                    post_ffn_norm: None,
                }
            })
            .collect::<Vec<_>>();
        let config = Config {
            recipe: inference::model::arch::recipe("llama").unwrap(),
            name: String::new(),
            n_layer: layers.len(),
            dim: 100,
            n_head: 1,
            n_head_kv: 1,
            head_dim: 100,
            ffn_dim: 300,
            vocab: ROWS as usize,
            rope_dim: 100,
            rope_base: 10_000.0,
            rope_scaling: RopeScaling::None,
            norm_eps: 1e-5,
            attn_scale: 0.1,
            swa: None,
            train_ctx: 128,
        };
        let weights = Weights {
            output: output.unwrap_or_else(|| token_embd.clone()),
            token_embd,
            output_norm: vec![],
            layers,
            rope_freqs: None,
        };
        (Model { config, weights }, at + 10_000, whole)
    }

    fn layer(m: &Model, i: usize) -> (u64, u64) {
        let l = &m.weights.layers[i];
        (l.w_down.offset, l.wv.offset + l.wv.size - l.w_down.offset)
    }

    /// Bytes of `(offset, len)` the plan pins.
    fn held(runs: &[(u64, u64)], (o, n): (u64, u64)) -> u64 {
        pinned_within(runs, o, n)
    }

    fn scope<'a>(model: &'a Model, part: &'a Part, self_draft: usize) -> PinScope<'a> {
        PinScope {
            model,
            part,
            self_draft,
        }
    }

    fn report(scope: PinScope<'_>, runs: &[(u64, u64)]) -> String {
        let pinned = |o, n| pinned_within(runs, o, n);
        let total = runs.iter().map(|r| r.1).sum();
        PinReport {
            scope,
            total,
            pinned: &pinned,
        }
        .to_string()
    }

    #[test]
    fn an_untied_embedding_comes_after_everything_read_in_full() {
        let (m, len, whole) = model(6, false, 0);
        let scope = scope(&m, &whole, 0);
        let ranked: Vec<_> = scope.ranked().collect();
        assert_eq!(ranked.len(), 1 + 6 * 7 + 1);
        assert_eq!(ranked[0], (Value::Full, &m.weights.output));
        assert_eq!(ranked[43], (Value::Row, &m.weights.token_embd));
        assert!(ranked[1..43].iter().all(|r| r.0 == Value::Full));
        // Each layer's matrices in file order, layer after layer.
        assert_eq!(ranked[1].1.offset, m.weights.layers[0].w_down.offset);
        assert_eq!(ranked[7].1.offset, m.weights.layers[0].wv.offset);
        assert_eq!(ranked[8].1.offset, m.weights.layers[1].w_down.offset);
        let wanted = scope.ranges(Some(len)).unwrap();
        assert_eq!(wanted.last(), Some(&(0, len)));
        let page = 1024;
        // The file's first bytes are the head and the embedding; a budget of the head and two
        // and a half layers pins those layers, not the embedding that lies before them.
        let budget = HEAD + 2 * LAYER + LAYER / 2 + 8 * page;
        let runs = pinned::plan(&wanted, len, page, budget).unwrap();
        let e = &m.weights.token_embd;
        // At most the pages it shares with the head and layer 0.
        assert!(held(&runs, (e.offset, e.size)) < 2 * page, "{runs:?}");
        assert_eq!(held(&runs, (m.weights.output.offset, HEAD)), HEAD);
        for i in 0..2 {
            assert_eq!(held(&runs, layer(&m, i)), layer(&m, i).1, "layer {i}");
        }
        assert!(held(&runs, layer(&m, 2)) > LAYER / 3);
        assert!(held(&runs, layer(&m, 3)) < page);
        assert_eq!(runs.iter().map(|r| r.1).sum::<u64>(), budget / page * page);
        // A budget for every tensor but the embedding still pins no more of it; only what is
        // left after every layer goes to it.
        let all_but = HEAD + 6 * (LAYER + 7 * 600) + 4 * page;
        let runs = pinned::plan(&wanted, len, page, all_but).unwrap();
        // The shared pages and the few pages left over.
        assert!(held(&runs, (e.offset, e.size)) <= 6 * page);
        assert!((0..6).all(|i| held(&runs, layer(&m, i)) == layer(&m, i).1));
        let runs = pinned::plan(&wanted, len, page, all_but + EMBD + 4 * page).unwrap();
        assert_eq!(held(&runs, (e.offset, e.size)), EMBD);
        // The bytes a token streams: the matrices not pinned, and one row of the embedding.
        let none = scope.streamed_per_token(&|_, _| 0);
        assert_eq!(none, HEAD + 6 * LAYER + EMBD / ROWS);
        assert_eq!(scope.streamed_per_token(&|_, n| n), 0);
        let runs = pinned::plan(&wanted, len, page, budget).unwrap();
        let streamed = scope.streamed_per_token(&|o, n| pinned_within(&runs, o, n));
        let matrices: u64 = m.weights.layers[2..]
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down])
            .map(|t| t.size - held(&runs, (t.offset, t.size)))
            .sum();
        let row = (EMBD - held(&runs, (e.offset, e.size))) * (EMBD / ROWS) / EMBD;
        assert_eq!(streamed, matrices + row);
        assert!(streamed < 4 * LAYER - LAYER / 3 + EMBD / ROWS);
        assert_eq!(
            report(scope, &runs),
            "pinned 0 MiB: output head, layers 0-1, part of layer 2 (read in full each token); \
             layers 3-5 streamed; token embedding streamed (one row a token)"
        );
    }

    #[test]
    fn a_tied_embedding_is_the_head_and_read_in_full() {
        let (m, len, whole) = model(4, true, 0);
        let scope = scope(&m, &whole, 0);
        let ranked: Vec<_> = scope.ranked().collect();
        // Once, first, valued as read in full; no lookup-only entry.
        assert_eq!(ranked.len(), 1 + 4 * 7);
        assert_eq!(ranked[0], (Value::Full, &m.weights.token_embd));
        assert!(ranked.iter().all(|r| r.0 == Value::Full));
        let e = &m.weights.token_embd;
        let runs = pinned::plan(&scope.ranges(Some(len)).unwrap(), len, 512, EMBD + 1024).unwrap();
        assert_eq!(held(&runs, (e.offset, e.size)), EMBD);
        assert_eq!(
            report(scope, &runs),
            "pinned 0 MiB: output head = token embedding (read in full each token); \
             layers 0-3 streamed"
        );
        // All of it fits: the whole file is wanted, so it is pinned whole.
        let (runs, slots) = layout(
            len,
            len,
            512,
            0,
            Policy::ResidentPrefix,
            &scope.ranges(Some(len)).unwrap(),
        )
        .unwrap();
        assert_eq!((runs, slots), (vec![(0, len)], 0));
    }

    #[test]
    fn the_self_drafts_layers_and_head_come_first() {
        let (m, len, whole) = model(6, false, 0);
        let scope = scope(&m, &whole, 2);
        let ranked: Vec<_> = scope.ranked().collect();
        assert_eq!(ranked[0], (Value::Draft, &m.weights.output));
        assert!(ranked[1..15].iter().all(|r| r.0 == Value::Draft));
        assert_eq!(ranked[14].1.offset, m.weights.layers[1].wv.offset);
        assert!(ranked[15..43].iter().all(|r| r.0 == Value::Full));
        assert_eq!(ranked[43].0, Value::Row);
        let page = 1024;
        let wanted = scope.ranges(Some(len)).unwrap();
        let runs = pinned::plan(&wanted, len, page, HEAD + 3 * LAYER).unwrap();
        assert_eq!(held(&runs, (m.weights.output.offset, HEAD)), HEAD);
        assert_eq!(held(&runs, layer(&m, 1)), layer(&m, 1).1);
        assert!(held(&runs, layer(&m, 2)) > 0);
        assert!(held(&runs, layer(&m, 3)) < page);
        assert_eq!(
            report(scope, &runs),
            "pinned 0 MiB: output head, layers 0-1 (the self-draft's: read at every guess); \
             part of layer 2 (read in full each token); layers 3-5 streamed; token embedding \
             streamed (one row a token)"
        );
        // The budget ends in the draft's layers: the layers streamed are said as one stretch.
        let runs = pinned::plan(&wanted, len, page, HEAD + LAYER + 6 * 600 + 3 * page).unwrap();
        assert_eq!(
            report(scope, &runs),
            "pinned 0 MiB: output head, layer 0 (the self-draft's: read at every guess); \
             layers 1-5 streamed; token embedding streamed (one row a token)"
        );
        // A self-draft as deep as the part: every layer is the draft's.
        let deep = PinScope {
            self_draft: 99,
            ..scope
        };
        assert!(deep.ranked().take(43).all(|r| r.0 == Value::Draft));
    }

    #[test]
    fn a_budget_smaller_than_one_tensor_pins_whole_pages_of_the_first() {
        let (m, len, whole) = model(2, false, 0);
        let scope = scope(&m, &whole, 1);
        let wanted = scope.ranges(Some(len)).unwrap();
        let head = m.weights.output.offset;
        let page = 4096;
        let runs = pinned::plan(&wanted, len, page, 3 * page + 100).unwrap();
        assert_eq!(runs, vec![(head / page * page, 3 * page)]);
        assert!(pinned::plan(&wanted, len, page, page - 1)
            .unwrap()
            .is_empty());
        // Through the cache: the head's first pages are read in place, the rest streams.
        let d = data(len as usize);
        let c = PageCache::for_ranges(
            Mem::new(d.clone()),
            12 * page,
            page as usize,
            Options::default(),
            &wanted,
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(c.pinned_within(head, HEAD), c.resident_bytes());
        assert!(c.resident_bytes() > 0 && c.resident_bytes() < HEAD);
        let mut b = vec![0; HEAD as usize];
        c.read_at(head, &mut b).unwrap();
        assert!(b == d[head as usize..(head + HEAD) as usize]);
    }

    #[test]
    fn a_ring_board_pins_its_own_layers_by_the_same_rule() {
        let (m, _, _) = model(6, false, 0);
        // A board after the head: layers 2..5, no ends, no self-draft of its own.
        let part = Part {
            layers: 2..5,
            ends: false,
        };
        let scope = scope(&m, &part, 3);
        let ranked: Vec<_> = scope.ranked().collect();
        assert_eq!(ranked.len(), 3 * 7);
        assert!(ranked.iter().all(|r| r.0 == Value::Full));
        assert_eq!(ranked[0].1.offset, layer(&m, 2).0);
        assert_eq!(scope.ranges(None).unwrap().len(), 21);
        // The head of a ring of layers 0..2 with a self-draft of 3: the draft is its 2 layers.
        let head = Part {
            layers: 0..2,
            ends: true,
        };
        let scope = PinScope {
            part: &head,
            ..scope
        };
        let values: Vec<_> = scope.ranked().map(|r| r.0).collect();
        assert_eq!(values.len(), 1 + 14 + 1);
        assert!(values[..15].iter().all(|&v| v == Value::Draft));
        assert_eq!(values[15], Value::Row);
        // Layers past the model's or a range backwards: only the ends, and no panic.
        for ((start, end), n) in [((4, 9), 1 + 14 + 1), ((9, 12), 2), ((5, 3), 2)] {
            let odd = Part {
                layers: start..end,
                ends: true,
            };
            let scope = PinScope {
                part: &odd,
                ..scope
            };
            assert_eq!(scope.ranked().count(), n);
            let pinned = |_, _| 0;
            let r = PinReport {
                scope,
                total: 0,
                pinned: &pinned,
            };
            assert!(r.to_string().starts_with("pinned 0 MiB"));
        }
    }

    #[test]
    fn tensors_past_4_gib_are_ranked_and_pinned_there() {
        const G: u64 = 1 << 30;
        let (m, len, whole) = model(3, false, 5 * G);
        let scope = scope(&m, &whole, 0);
        let wanted = scope.ranges(Some(len)).unwrap();
        let page = 4096;
        let runs = pinned::plan(&wanted, len, page, HEAD + LAYER + 4 * page).unwrap();
        assert!(runs.iter().all(|r| r.0 >= 5 * G));
        assert_eq!(held(&runs, (m.weights.output.offset, HEAD)), HEAD);
        assert_eq!(held(&runs, layer(&m, 0)), layer(&m, 0).1);
        let e = &m.weights.token_embd;
        assert!(held(&runs, (e.offset, e.size)) < 2 * page);
        // Through a cache over the 6 GiB file (laid out from 5 GiB on, well before its end).
        assert!(len < FAR_LEN);
        let opts = Options {
            policy: Policy::ResidentPrefix,
            readahead: 0,
        };
        let budget = HEAD + LAYER + 40 * page;
        let c = PageCache::for_ranges(Far, budget, page as usize, opts, &wanted, &mut |_, _| {})
            .unwrap();
        let (o, n) = layer(&m, 0);
        let run = c.resident(o, n as usize).unwrap();
        assert!(run == far_bytes(o, n as usize));
        assert!(c.resident(e.offset + EMBD / 2, 10).is_none());
    }

    /// Ranges that overlap earlier ones take only the pages not yet taken: the budget is not
    /// spent twice, and the last wanted range (the whole file) fills the gaps between them.
    #[test]
    fn overlapping_wanted_ranges_spend_the_budget_once() {
        let page = 1024;
        let wanted = [(5 * page, 2 * page), (2 * page, 10 * page), (0, 20 * page)];
        let plan = |budget| pinned::plan(&wanted, 20 * page, page, budget).unwrap();
        assert_eq!(
            plan(4 * page),
            vec![(2 * page, 2 * page), (5 * page, 2 * page)]
        );
        assert_eq!(plan(10 * page), vec![(2 * page, 10 * page)]);
        assert_eq!(plan(13 * page), vec![(0, 13 * page)]);
        assert_eq!(plan(1 << 30), vec![(0, 20 * page)]);
    }
}
