//! Running out of memory as a value: [`OutOfMemory`] names what was being allocated and how many
//! bytes were asked for, and the helpers here allocate fallibly (`Vec::try_reserve_exact`), so a
//! board whose heap is too small for a buffer prints which one instead of halting in the
//! allocator. The load path's big buffers (run state, KV cache, page cache, prompt-cache I/O,
//! sampler) go through them; the per-token path allocates nothing.
//!
//! [`set_stage`] records which load step is running, so that an allocation that still fails
//! infallibly (a panic in `no_std`) can be reported with the step that made it.

use alloc::collections::BinaryHeap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicUsize, Ordering};

/// An allocation failed: what it was for and its size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfMemory {
    pub what: &'static str,
    pub bytes: usize,
}

impl fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "out of memory allocating {} ({} bytes)",
            self.what, self.bytes
        )
    }
}

/// An empty `Vec` with room for `n` elements, or the error naming `what`.
pub fn with_capacity<T>(n: usize, what: &'static str) -> Result<Vec<T>, OutOfMemory> {
    let mut v = Vec::new();
    reserve(&mut v, n, what)?;
    Ok(v)
}

/// `n` copies of `value`, or the error naming `what` (`vec![value; n]`, fallibly).
pub fn filled<T: Clone>(n: usize, value: T, what: &'static str) -> Result<Vec<T>, OutOfMemory> {
    let mut v = with_capacity(n, what)?;
    v.resize(n, value);
    Ok(v)
}

/// Room for `extra` more elements in `v` (exactly), or the error naming `what`.
pub fn reserve<T>(v: &mut Vec<T>, extra: usize, what: &'static str) -> Result<(), OutOfMemory> {
    v.try_reserve_exact(extra).map_err(|_| OutOfMemory {
        what,
        bytes: extra.saturating_mul(core::mem::size_of::<T>()),
    })
}

/// `f(i)` for `i` in `0..n`, collected fallibly (`(0..n).map(f).collect()`).
pub fn collect<T>(
    n: usize,
    what: &'static str,
    f: impl FnMut(usize) -> T,
) -> Result<Vec<T>, OutOfMemory> {
    let mut v = with_capacity(n, what)?;
    v.extend((0..n).map(f));
    Ok(v)
}

/// `v.push(x)`, fallibly: grows as `push` does (doubling), or gives the error naming `what`.
pub fn push<T>(v: &mut Vec<T>, x: T, what: &'static str) -> Result<(), OutOfMemory> {
    if v.len() == v.capacity() {
        v.try_reserve(1)
            .map_err(|_| grow_error::<T>(v.capacity(), what))?;
    }
    v.push(x);
    Ok(())
}

/// `v.extend_from_slice(xs)`, fallibly (growing as `extend_from_slice` does).
pub fn extend<T: Clone>(v: &mut Vec<T>, xs: &[T], what: &'static str) -> Result<(), OutOfMemory> {
    v.try_reserve(xs.len())
        .map_err(|_| grow_error::<T>(v.capacity().max(xs.len()), what))?;
    v.extend_from_slice(xs);
    Ok(())
}

/// `heap.push(x)`, fallibly (growing as `push` does).
pub fn push_heap<T: Ord>(
    heap: &mut BinaryHeap<T>,
    x: T,
    what: &'static str,
) -> Result<(), OutOfMemory> {
    if heap.len() == heap.capacity() {
        heap.try_reserve(1)
            .map_err(|_| grow_error::<T>(heap.capacity(), what))?;
    }
    heap.push(x);
    Ok(())
}

/// The error for growing a buffer of `cap` elements of `T` (to about twice that).
fn grow_error<T>(cap: usize, what: &'static str) -> OutOfMemory {
    OutOfMemory {
        what,
        bytes: cap.max(4).saturating_mul(2 * core::mem::size_of::<T>()),
    }
}

/// `s.to_string()`, fallibly.
pub fn copy_str(s: &str, what: &'static str) -> Result<String, OutOfMemory> {
    let mut out = String::new();
    out.try_reserve_exact(s.len()).map_err(|_| OutOfMemory {
        what,
        bytes: s.len(),
    })?;
    out.push_str(s);
    Ok(out)
}

/// `format!(args)`, fallibly: the text is measured first, then written into a `String` reserved
/// to its exact length (so the write never grows it).
pub fn format(args: fmt::Arguments<'_>, what: &'static str) -> Result<String, OutOfMemory> {
    struct Count(usize);
    impl fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut n = Count(0);
    // Writing into a counter cannot fail unless a `Display` impl does; then the text is empty.
    let _ = fmt::write(&mut n, args);
    let mut s = String::new();
    s.try_reserve_exact(n.0)
        .map_err(|_| OutOfMemory { what, bytes: n.0 })?;
    let _ = fmt::write(&mut s, args);
    Ok(s)
}

/// The steps of a run that allocate, as [`set_stage`] records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Nothing recorded yet (booting).
    Boot,
    /// Mounting the card and reading `lmboot.txt`.
    Mount,
    /// Reading the GGUF header, metadata and tensor table, and the model's weights table.
    Model,
    /// Building the tokenizer from the vocabulary.
    Tokenizer,
    /// The KV cache and the run state's buffers.
    Buffers,
    /// The page cache's resident part and window.
    PageCache,
    /// The chat: prompt cache, template, turns.
    Chat,
    /// Generating from the configured prompt.
    Generate,
}

impl Stage {
    const ALL: [Stage; 8] = [
        Stage::Boot,
        Stage::Mount,
        Stage::Model,
        Stage::Tokenizer,
        Stage::Buffers,
        Stage::PageCache,
        Stage::Chat,
        Stage::Generate,
    ];

    /// What the step was doing, for a message ("while ...").
    pub fn name(self) -> &'static str {
        match self {
            Stage::Boot => "booting",
            Stage::Mount => "mounting the card and reading the configuration",
            Stage::Model => "reading the model's header and tensor table",
            Stage::Tokenizer => "building the tokenizer",
            Stage::Buffers => "allocating the KV cache and run state",
            Stage::PageCache => "filling the page cache",
            Stage::Chat => "chatting",
            Stage::Generate => "generating",
        }
    }
}

static STAGE: AtomicUsize = AtomicUsize::new(0);

/// Record that `s` is running (for [`stage`]).
pub fn set_stage(s: Stage) {
    let i = Stage::ALL.iter().position(|&x| x == s).unwrap_or(0);
    STAGE.store(i, Ordering::Relaxed);
}

/// The step last recorded by [`set_stage`].
pub fn stage() -> Stage {
    Stage::ALL
        .get(STAGE.load(Ordering::Relaxed))
        .copied()
        .unwrap_or(Stage::Boot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn a_request_too_large_is_an_error_naming_it() {
        let e = with_capacity::<u64>(usize::MAX / 4, "test buffer").unwrap_err();
        assert_eq!(e.what, "test buffer");
        assert_eq!(e.bytes, (usize::MAX / 4).saturating_mul(8));
        assert!(e
            .to_string()
            .starts_with("out of memory allocating test buffer ("));
        let v = filled(5, 7u8, "small").unwrap();
        assert_eq!(v, [7u8; 5]);
        assert_eq!(collect(3, "squares", |i| i * i).unwrap(), [0, 1, 4]);
        let s = format(format_args!("blk.{}.{}", 12, "ffn_up.weight"), "name").unwrap();
        assert_eq!(s, "blk.12.ffn_up.weight");
        assert_eq!(s.capacity(), s.len());
    }

    #[test]
    fn the_stage_is_remembered() {
        for s in Stage::ALL {
            set_stage(s);
            assert_eq!(stage(), s);
        }
        set_stage(Stage::Boot);
    }
}
