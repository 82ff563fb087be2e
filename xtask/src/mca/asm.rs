//! Cutting a hot loop out of compiler assembly (`rustc --emit asm`, `clang -S`) as text llvm-mca
//! reads: find the function, find its loops (a label and a later branch back to it), pick one
//! (or write out a common path: inner loops by trip count, or basic blocks in order), and drop
//! what is not an instruction (labels, directives, comments).

/// Which loop of a function to measure.
#[derive(Debug, Clone, Copy)]
pub enum Pick {
    /// The innermost loop with the most instructions (a loop holding no other loop).
    Innermost,
    /// The outermost loop, its inner loops (one level) written out `n` times each: a loop over
    /// blocks whose inner loop has a fixed trip count the compiler did not unroll.
    Outer(usize),
    /// The `k`-th innermost loop in text order (from 0): a main loop before a larger scalar tail.
    Nth(usize),
    /// The outermost loop with each loop inside it (any depth, in text order of their first line)
    /// written out as many times as the list says (0: dropped, a rare path); the list must name
    /// every inner loop. Loops sharing a label count as one, to the last branch back.
    Nest(&'static [usize]),
    /// The basic blocks a common path runs, in order, each `(n, times)`: block `n` of the
    /// function (`.LBB<f>_n:` or a `%bb.n:` comment, as clang writes them) `times` times over.
    /// Each block is written up to its branch to the next (or whole, if it falls through into
    /// it), the last up to the first; a path whose blocks do not connect is an error.
    Trace(&'static [(usize, usize)]),
}

/// The comment leader of the assembly dialect (`//` for aarch64, `#` for RISC-V).
fn comment(riscv: bool) -> &'static str {
    if riscv {
        "#"
    } else {
        "//"
    }
}

/// The label a line defines (`name:` with maybe a comment after it).
fn label_of(line: &str) -> Option<&str> {
    let (name, _) = line.trim_start().split_once(':')?;
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._$".contains(c));
    ok.then_some(name)
}

/// The lines of function `name` (its label up to the next `.Lfunc_end`, `.size` or `.cfi_endproc`).
pub fn function<'a>(text: &'a str, name: &str) -> Option<Vec<&'a str>> {
    let mut lines = text.lines();
    lines.find(|l| label_of(l) == Some(name) && !l.starts_with(char::is_whitespace))?;
    Some(
        lines
            .take_while(|l| {
                let t = l.trim_start();
                !(t.starts_with(".Lfunc_end") || t.starts_with(".size") || t == ".cfi_endproc")
            })
            .collect(),
    )
}

/// The first label of `text` that starts with `prefix` (a Rust symbol's mangled path).
pub fn symbol_with_prefix<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .filter_map(label_of)
        .find(|n| n.starts_with(prefix))
}

/// The legacy mangling prefix of a Rust path (`a::b::c` → `_ZN1a1b1c17h`, before the hash).
pub fn mangled_prefix(path: &str) -> String {
    let mut s = String::from("_ZN");
    for part in path.split("::") {
        s += &format!("{}{part}", part.len());
    }
    s + "17h"
}

/// The symbol a thin wrapper jumps to (`b`, `j` or `tail` to a mangled name), if it has no loop.
pub fn tail_call<'a>(body: &[&'a str], riscv: bool) -> Option<&'a str> {
    if !loops(body, riscv).is_empty() {
        return None;
    }
    body.iter().find_map(|l| {
        let t = instruction(l, riscv)?;
        let (op, arg) = t.split_once(char::is_whitespace)?;
        let arg = arg.trim();
        (["b", "j", "tail"].contains(&op) && arg.starts_with("_Z")).then_some(arg)
    })
}

/// The instruction text of a line without its comment, or None for labels, directives and blanks.
pub fn instruction(line: &str, riscv: bool) -> Option<&str> {
    let t = line.split(comment(riscv)).next().unwrap_or("").trim();
    let skip =
        t.is_empty() || t.starts_with('.') || label_of(t).is_some_and(|n| t == format!("{n}:"));
    (!skip).then_some(t)
}

/// Loops as (label line, branch line) index pairs: a branch whose last operand names a label
/// defined on an earlier line.
pub fn loops(body: &[&str], riscv: bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (j, l) in body.iter().enumerate() {
        let Some(t) = instruction(l, riscv) else {
            continue;
        };
        let Some(target) = t.rsplit([',', ' ', '\t']).next() else {
            continue;
        };
        if let Some(i) = body[..j].iter().position(|l| label_of(l) == Some(target)) {
            out.push((i, j));
        }
    }
    out
}

fn count(body: &[&str], (s, e): (usize, usize), riscv: bool) -> usize {
    body[s..=e]
        .iter()
        .filter(|l| instruction(l, riscv).is_some())
        .count()
}

/// The instructions of the loop `pick` selects in `body`.
pub fn hot_loop(body: &[&str], pick: Pick, riscv: bool) -> Result<Vec<String>, String> {
    let all = loops(body, riscv);
    let inside = |a: (usize, usize), b: (usize, usize)| a != b && b.0 <= a.0 && a.1 <= b.1;
    let lines: Vec<&str> = match pick {
        Pick::Innermost => {
            let l = all
                .iter()
                .filter(|&&a| !all.iter().any(|&b| inside(b, a)))
                .max_by_key(|&&a| count(body, a, riscv))
                .ok_or("no loop found")?;
            body[l.0..=l.1].to_vec()
        }
        Pick::Outer(n) => {
            let o = outermost(&all)?;
            let inner: Vec<_> = all
                .iter()
                .filter(|&&a| inside(a, o) && !all.iter().any(|&b| inside(a, b) && inside(b, o)))
                .collect();
            let mut v = Vec::new();
            let mut at = o.0;
            for &&(s, e) in &inner {
                v.extend_from_slice(&body[at..s]);
                for _ in 0..n {
                    v.extend_from_slice(&body[s..=e]);
                }
                at = e + 1;
            }
            v.extend_from_slice(&body[at..=o.1]);
            v
        }
        Pick::Nth(k) => {
            let mut inner: Vec<_> = all
                .iter()
                .filter(|&&a| !all.iter().any(|&b| inside(b, a)))
                .collect();
            inner.sort();
            let l = inner
                .get(k)
                .ok_or_else(|| format!("loop {k} asked, {} innermost loops", inner.len()))?;
            body[l.0..=l.1].to_vec()
        }
        Pick::Nest(trips) => nest(body, &merged(&all), trips)?,
        Pick::Trace(path) => trace(body, path, riscv)?,
    };
    Ok(lines
        .iter()
        .filter_map(|l| instruction(l, riscv))
        .map(|t| fix_vsetvli(t, riscv))
        .collect())
}

/// The loop of longest text.
fn outermost(all: &[(usize, usize)]) -> Result<(usize, usize), String> {
    all.iter()
        .copied()
        .max_by_key(|a| a.1 - a.0)
        .ok_or_else(|| "no loop found".to_string())
}

/// Loops with one label as one: to its last branch back, in text order.
fn merged(all: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = Vec::new();
    for &(s, e) in all {
        match v.iter_mut().find(|l| l.0 == s) {
            Some(l) => l.1 = l.1.max(e),
            None => v.push((s, e)),
        }
    }
    v.sort_by_key(|&(s, e)| (s, usize::MAX - e));
    v
}

/// [`Pick::Nest`]: the outermost loop, the loops in it repeated by `trips` (in `all`'s order).
fn nest<'a>(
    body: &[&'a str],
    all: &[(usize, usize)],
    trips: &[usize],
) -> Result<Vec<&'a str>, String> {
    let o = outermost(all)?;
    let inner: Vec<_> = all
        .iter()
        .copied()
        .filter(|&a| a != o && o.0 <= a.0 && a.1 <= o.1)
        .collect();
    if inner.len() != trips.len() {
        return Err(format!(
            "{} loops inside the outermost, {} trip counts given",
            inner.len(),
            trips.len()
        ));
    }
    let mut v = Vec::new();
    expand(body, o, &inner, trips, &mut v);
    Ok(v)
}

/// The lines of loop `l`, each loop directly inside it written out its trip count of times.
fn expand<'a>(
    body: &[&'a str],
    l: (usize, usize),
    inner: &[(usize, usize)],
    trips: &[usize],
    v: &mut Vec<&'a str>,
) {
    let within = |a: (usize, usize), b: (usize, usize)| a != b && b.0 <= a.0 && a.1 <= b.1;
    let mut at = l.0;
    for (i, &c) in inner.iter().enumerate() {
        let direct = within(c, l) && !inner.iter().any(|&m| within(c, m) && within(m, l));
        if !direct {
            continue;
        }
        v.extend_from_slice(&body[at..c.0]);
        for _ in 0..trips[i] {
            expand(body, c, inner, trips, v);
        }
        at = c.1 + 1;
    }
    v.extend_from_slice(&body[at..=l.1]);
}

/// The number of the basic block a line starts (`.LBB3_7:` or a `%bb.7:` comment), if any.
fn block_start(line: &str) -> Option<usize> {
    let t = line.trim_start();
    let n = if let Some(rest) = t.strip_prefix(".LBB") {
        rest.split_once(':')?.0.split_once('_')?.1
    } else {
        let (_, rest) = t.split_once("%bb.")?;
        rest.split_once(':')?.0
    };
    n.parse().ok()
}

/// The function's basic blocks: (number, first line, end line exclusive), in text order. Code
/// before the first numbered block is block 0.
fn blocks(body: &[&str]) -> Vec<(usize, usize, usize)> {
    let starts: Vec<(usize, usize)> = body
        .iter()
        .enumerate()
        .filter_map(|(i, l)| block_start(l).map(|n| (n, i)))
        .collect();
    let mut v = Vec::new();
    if starts.first().is_none_or(|s| s.1 > 0) {
        v.push((0, 0, starts.first().map_or(body.len(), |s| s.1)));
    }
    for (k, &(n, i)) in starts.iter().enumerate() {
        v.push((n, i, starts.get(k + 1).map_or(body.len(), |s| s.1)));
    }
    v
}

/// Where block `a` (index into `bs`) leaves for block `b` on a path: after the first branch in it
/// that names `b`'s label (what follows that branch is off the path), or at its end if it falls
/// through into `b` (the next block, its last instruction not a jump); None if it cannot.
fn leaves(
    body: &[&str],
    bs: &[(usize, usize, usize)],
    a: usize,
    b: usize,
    riscv: bool,
) -> Option<usize> {
    let names = |t: &str| {
        t.rsplit([',', ' ', '\t'])
            .next()
            .and_then(|x| x.strip_prefix(".LBB"))
            .and_then(|x| x.split_once('_'))
            .and_then(|(_, n)| n.parse::<usize>().ok())
            == Some(bs[b].0)
    };
    let (start, end) = (bs[a].1, bs[a].2);
    if let Some(i) = (start..end).find(|&i| instruction(body[i], riscv).is_some_and(names)) {
        return Some(i + 1);
    }
    let last = body[start..end]
        .iter()
        .rev()
        .find_map(|l| instruction(l, riscv));
    let jump = |t: &str| ["b", "j", "ret"].contains(&t.split_whitespace().next().unwrap_or(""));
    (b == a + 1 && !last.is_some_and(jump)).then_some(end)
}

/// [`Pick::Trace`]: the blocks of `path` written out in order, each up to where it leaves for the
/// next (the last for the first).
fn trace<'a>(
    body: &[&'a str],
    path: &[(usize, usize)],
    riscv: bool,
) -> Result<Vec<&'a str>, String> {
    let bs = blocks(body);
    let mut order = Vec::new();
    for &(n, times) in path {
        let i = bs
            .iter()
            .position(|b| b.0 == n)
            .ok_or_else(|| format!("no basic block {n}"))?;
        order.extend(std::iter::repeat_n(i, times));
    }
    let mut v = Vec::new();
    for (k, &a) in order.iter().enumerate() {
        let b = order[(k + 1) % order.len()];
        let end = leaves(body, &bs, a, b, riscv)
            .ok_or_else(|| format!("block {} does not lead to block {}", bs[a].0, bs[b].0))?;
        v.extend_from_slice(&body[bs[a].1..end]);
    }
    Ok(v)
}

/// `vsetvli` / `vsetivli` without a tail and mask policy (GNU as accepts them; LLVM does not)
/// get RVV 1.0's default, `tu, mu`.
fn fix_vsetvli(t: &str, riscv: bool) -> String {
    let set = t.starts_with("vsetvli") || t.starts_with("vsetivli");
    if riscv && set && !t.contains(", t") {
        format!("{t}, tu, mu")
    } else {
        t.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARM: &str = "f:  // @f
\tmov x0, #1
.LBB0_1:
\tadd x0, x0, #1 // one
.LBB0_2:
\tmul x1, x1, x0
\tsubs x2, x2, #1
\tb.ne .LBB0_2
\tb.ne .LBB0_1
\tret
.Lfunc_end0:
";

    #[test]
    fn innermost_and_outer_loops() {
        let body = function(ARM, "f").unwrap();
        assert_eq!(loops(&body, false).len(), 2);
        let inner = hot_loop(&body, Pick::Innermost, false).unwrap();
        assert_eq!(inner, ["mul x1, x1, x0", "subs x2, x2, #1", "b.ne .LBB0_2"]);
        let outer = hot_loop(&body, Pick::Outer(2), false).unwrap();
        assert_eq!(outer.len(), 1 + 2 * 3 + 1);
    }

    /// A block loop (`.LBB1_1`) around a max loop (`.LBB1_2`), a rare scan (`.LBB1_3`) and a
    /// group loop (`.LBB1_4`); then a scalar tail loop (`.LBB1_6`) larger than the others.
    const NEST: &str = "g:
\tmov x0, #0
.LBB1_1:
\tldr q0, [x1]
.LBB1_2:
\tfmax v1.4s, v1.4s, v0.4s
\tb.ne .LBB1_2
\tcbz x3, .LBB1_4
.LBB1_3:
\tldr s2, [x1]
\tb.ne .LBB1_3
.LBB1_4:
\tstr q1, [x2]
\tb.ne .LBB1_4
\tsubs x4, x4, #1
\tb.ne .LBB1_1
.LBB1_6:
\tldrb w5, [x1]
\tmul w6, w5, w5
\tadd w7, w7, w6
\tsubs x8, x8, #1
\tb.ne .LBB1_6
\tret
.Lfunc_end1:
";

    #[test]
    fn nth_and_nest() {
        let body = function(NEST, "g").unwrap();
        assert_eq!(
            hot_loop(&body, Pick::Innermost, false).unwrap().len(),
            5,
            "the tail is the largest innermost loop"
        );
        let first = hot_loop(&body, Pick::Nth(0), false).unwrap();
        assert_eq!(first, ["fmax v1.4s, v1.4s, v0.4s", "b.ne .LBB1_2"]);
        assert!(hot_loop(&body, Pick::Nth(4), false).is_err());
        let nest = hot_loop(&body, Pick::Nest(&[3, 0, 2]), false).unwrap();
        let count = |op: &str| nest.iter().filter(|l| l.starts_with(op)).count();
        assert_eq!((count("fmax"), count("ldr s2"), count("str q1")), (3, 0, 2));
        assert_eq!(nest.len(), 1 + 3 * 2 + 1 + 2 * 2 + 2);
        assert!(
            hot_loop(&body, Pick::Nest(&[3, 2]), false).is_err(),
            "every inner loop needs a count"
        );
    }

    #[test]
    fn nest_merges_loops_of_one_label() {
        let text = "k:
.LBB4_1:
\tadd x0, x0, #1
\tcbz x1, .LBB4_1
.LBB4_2:
\tmul x2, x2, x2
\tb.ne .LBB4_2
\tb .LBB4_1
.Lfunc_end4:
";
        let body = function(text, "k").unwrap();
        assert_eq!(loops(&body, false).len(), 3);
        let v = hot_loop(&body, Pick::Nest(&[2]), false).unwrap();
        assert_eq!(v.len(), 2 + 2 * 2 + 1, "one loop inside the merged .LBB4_1");
    }

    /// clang's layout: blocks by label or `%bb.` comment, the common path not in text order.
    const TRACE: &str = "h:
# %bb.0:
\tli a0, 0
\tj .LBB2_3
.LBB2_1:
\taddi a0, a0, 1
\tbnez a0, .LBB2_2
\tcall abort
.LBB2_2:
\tvle8.v v8, (a1)
\tbnez a2, .LBB2_2
# %bb.3:
\tbnez a3, .LBB2_1
# %bb.4:
\tcall memset
\tj .LBB2_1
.LBB2_5:
\tret
.Lfunc_end2:
";

    #[test]
    fn trace_blocks() {
        let body = function(TRACE, "h").unwrap();
        let path = hot_loop(&body, Pick::Trace(&[(2, 3), (3, 1), (1, 1)]), true).unwrap();
        assert_eq!(
            path,
            [
                "vle8.v v8, (a1)",
                "bnez a2, .LBB2_2",
                "vle8.v v8, (a1)",
                "bnez a2, .LBB2_2",
                "vle8.v v8, (a1)",
                "bnez a2, .LBB2_2",
                "bnez a3, .LBB2_1",
                "addi a0, a0, 1",
                "bnez a0, .LBB2_2",
            ],
            ".LBB2_1 is left at its branch to .LBB2_2: the call after it is off the path"
        );
        // bb.3 falls into bb.4, which jumps to .LBB2_1; .LBB2_1 does not lead to bb.4.
        let rare = Pick::Trace(&[(2, 1), (3, 1), (4, 1), (1, 1)]);
        assert_eq!(hot_loop(&body, rare, true).unwrap().len(), 2 + 1 + 2 + 2);
        assert!(hot_loop(&body, Pick::Trace(&[(1, 1), (4, 1)]), true).is_err());
        assert!(hot_loop(&body, Pick::Trace(&[(9, 1)]), true).is_err());
    }

    #[test]
    fn rust_paths_and_vsetvli() {
        assert_eq!(mangled_prefix("a::bc"), "_ZN1a2bc17h");
        assert_eq!(
            fix_vsetvli("vsetivli zero, 12, e8, m1", true),
            "vsetivli zero, 12, e8, m1, tu, mu"
        );
        assert_eq!(
            fix_vsetvli("vsetvli a0, a1, e8, m1, ta, ma", true),
            "vsetvli a0, a1, e8, m1, ta, ma"
        );
    }
}
