//! Cutting a hot loop out of compiler assembly (`rustc --emit asm`, `clang -S`) as text llvm-mca
//! reads: find the function, find its loops (a label and a later branch back to it), pick one,
//! and drop what is not an instruction (labels, directives, comments).

/// Which loop of a function to measure.
#[derive(Debug, Clone, Copy)]
pub enum Pick {
    /// The innermost loop with the most instructions (a loop holding no other loop).
    Innermost,
    /// The outermost loop, its inner loops (one level) written out `n` times each: a loop over
    /// blocks whose inner loop has a fixed trip count the compiler did not unroll.
    Outer(usize),
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
            let o = *all
                .iter()
                .max_by_key(|a| a.1 - a.0)
                .ok_or("no loop found")?;
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
    };
    Ok(lines
        .iter()
        .filter_map(|l| instruction(l, riscv))
        .map(|t| fix_vsetvli(t, riscv))
        .collect())
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
