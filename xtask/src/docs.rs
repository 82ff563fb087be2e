//! The documentation kept true: `docs/card.md`'s table of `lmboot.txt` keys written from the
//! parser's own table (`cargo xtask docs`), and the checks `tests/tests/docs_links.rs` runs over
//! README.md and docs/*.md: every relative link reaches a file (and a heading, for `#anchor`),
//! and every `cargo xtask` command and `--flag`, and every `lmboot-host` flag, named in their
//! code exists in that program's usage text (read from its source, not copied).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The comment before the generated key table in `docs/card.md`.
pub const KEYS_BEGIN: &str =
    "<!-- the keys: written by `cargo xtask docs` from KEYS in runtime/src/config.rs -->";
/// The comment after it.
pub const KEYS_END: &str = "<!-- end of the keys -->";

/// `docs/card.md`.
pub fn card_page() -> PathBuf {
    crate::workspace_root().join("docs/card.md")
}

/// `md` with the text between [`KEYS_BEGIN`] and [`KEYS_END`] replaced by the table of
/// `runtime::config::KEYS`.
pub fn with_key_table(md: &str) -> Result<String, String> {
    let missing = |m: &str| format!("docs/card.md lacks the line {m}");
    let begin = md.find(KEYS_BEGIN).ok_or_else(|| missing(KEYS_BEGIN))? + KEYS_BEGIN.len();
    let end = begin
        + md[begin..]
            .find(KEYS_END)
            .ok_or_else(|| missing(KEYS_END))?;
    let table = runtime::config::keys_markdown();
    Ok(format!("{}\n\n{table}\n{}", &md[..begin], &md[end..]))
}

/// `cargo xtask docs`: rewrite `docs/card.md`'s key table in place; whether it changed.
pub fn write_key_table() -> Result<bool, String> {
    let path = card_page();
    let md = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let new = with_key_table(&md)?;
    if new == md {
        return Ok(false);
    }
    std::fs::write(&path, new).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(true)
}

/// The pages checked: README.md and docs/*.md, sorted.
pub fn pages() -> Vec<PathBuf> {
    let root = crate::workspace_root();
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "md"));
    v.sort();
    v.insert(0, root.join("README.md"));
    v
}

/// The string constant `USAGE` of a Rust source file, as the program prints it.
pub fn usage_of(source: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(source).map_err(|e| format!("{}: {e}", source.display()))?;
    let file = syn::parse_file(&text).map_err(|e| format!("{}: {e}", source.display()))?;
    file.items
        .iter()
        .find_map(|item| match item {
            syn::Item::Const(c) if c.ident == "USAGE" => match &*c.expr {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .ok_or_else(|| format!("{}: no `const USAGE: &str = \"...\"`", source.display()))
}

/// The commands and flags a program's usage text names.
#[derive(Debug, Default)]
pub struct Usage {
    /// Subcommands: the words indented by two spaces under `commands:` (empty: none).
    pub commands: BTreeSet<String>,
    /// Every `--flag` in the text.
    pub flags: BTreeSet<String>,
}

impl Usage {
    pub fn parse(text: &str) -> Usage {
        let mut u = Usage::default();
        let mut in_commands = false;
        for line in text.lines() {
            if line.trim_end() == "commands:" {
                in_commands = true;
            } else if in_commands && line.starts_with("  ") && !line.starts_with("   ") {
                if let Some(w) = line.split_whitespace().next() {
                    u.commands.insert(w.to_string());
                }
            } else if !line.is_empty() && !line.starts_with(' ') {
                in_commands = false;
            }
            u.flags.extend(line.split_whitespace().filter_map(flag));
        }
        u
    }
}

/// A token's `--flag` (without a value, brackets or punctuation), if it is one.
fn flag(token: &str) -> Option<String> {
    let t = token.trim_start_matches(['[', '(', '`']);
    let name = t.strip_prefix("--")?;
    let end = name
        .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        .unwrap_or(name.len());
    let name = &name[..end];
    (name.len() > 1 && name.as_bytes()[0].is_ascii_lowercase()).then(|| format!("--{name}"))
}

/// xtask's and lmboot-host's usage texts, from their sources.
pub fn usages() -> Result<(Usage, Usage), String> {
    let root = crate::workspace_root();
    let xtask = Usage::parse(&usage_of(&root.join("xtask/src/main.rs"))?);
    let host = Usage::parse(&usage_of(&root.join("host/src/main.rs"))?);
    if xtask.commands.is_empty() || host.flags.is_empty() {
        return Err("the usage texts name no commands or no flags".into());
    }
    Ok((xtask, host))
}

/// A page's text split into prose (code blanked out) and its code: indented and fenced blocks
/// and inline spans, one string a line or span.
fn split_code(md: &str) -> (String, Vec<String>) {
    let mut prose = String::new();
    let mut code = Vec::new();
    let mut fenced = false;
    // The previous line was blank, or in an indented block.
    let mut block_may_follow = true;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            prose.push('\n');
            continue;
        }
        let blank = line.trim().is_empty();
        let indented = !blank && line.starts_with("    ") && block_may_follow;
        block_may_follow = blank || indented;
        if fenced || indented {
            code.push(line.to_string());
            prose.push('\n');
            continue;
        }
        let mut rest = line;
        while let Some(a) = rest.find('`') {
            let ticks = rest[a..].len() - rest[a..].trim_start_matches('`').len();
            let fence = &rest[a..a + ticks];
            let Some(b) = rest[a + ticks..].find(fence) else {
                break;
            };
            prose.push_str(&rest[..a]);
            code.push(rest[a + ticks..a + ticks + b].to_string());
            rest = &rest[a + ticks + b + ticks..];
        }
        prose.push_str(rest);
        prose.push('\n');
    }
    (prose, code)
}

/// A page's path from the workspace root, for messages.
fn shown(page: &Path) -> String {
    let root = crate::workspace_root();
    page.strip_prefix(&root)
        .unwrap_or(page)
        .display()
        .to_string()
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown page's headings (a repeated one numbered as GitHub numbers it).
pub fn anchors(md: &str) -> BTreeSet<String> {
    let (prose, _) = split_code(md);
    let mut seen = BTreeSet::new();
    for line in md.lines().zip(prose.lines()) {
        // Headings from the original line (their code spans are text), only where not in code.
        let (orig, p) = line;
        if !p.starts_with('#') {
            continue;
        }
        let s = slug(orig.trim_start_matches('#'));
        let mut a = s.clone();
        let mut n = 0;
        while seen.contains(&a) {
            n += 1;
            a = format!("{s}-{n}");
        }
        seen.insert(a);
    }
    seen
}

/// The relative links of a page's prose: (target path or empty, anchor or empty).
fn links(prose: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = prose;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = &rest[..end];
        if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
            continue;
        }
        let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
        out.push((path.to_string(), anchor.to_string()));
    }
    out
}

/// What is wrong with one page's links: each a line naming the page and the link.
pub fn check_links(page: &Path) -> Vec<String> {
    let md = std::fs::read_to_string(page).unwrap_or_default();
    let (prose, _) = split_code(&md);
    let dir = page.parent().unwrap_or(Path::new("."));
    let name = shown(page);
    let mut bad = Vec::new();
    for (path, anchor) in links(&prose) {
        let file = if path.is_empty() {
            page.to_path_buf()
        } else {
            dir.join(&path)
        };
        if !file.exists() {
            bad.push(format!("{name}: link to {path}: no such file"));
            continue;
        }
        if anchor.is_empty() || file.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let target = std::fs::read_to_string(&file).unwrap_or_default();
        if !anchors(&target).contains(&anchor) {
            bad.push(format!("{name}: link to {path}#{anchor}: no such heading"));
        }
    }
    bad
}

/// Where a command's arguments end on a line: a comment, `&&`, `;`, a pipe between words.
fn command_end(s: &str) -> usize {
    [" #", "&&", ";", " | ", " || "]
        .iter()
        .filter_map(|m| s.find(m))
        .min()
        .unwrap_or(s.len())
}

/// The boards' names: the files in `boards/`.
fn boards() -> BTreeSet<String> {
    let dir = crate::workspace_root().join("boards");
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                name.strip_suffix(".toml").map(String::from)
            })
            .collect()
        })
        .unwrap_or_default()
}

/// The commands and flags one piece of code names that its program does not have.
pub fn check_commands(code: &str, xtask: &Usage, host: &Usage) -> Vec<String> {
    let mut bad = Vec::new();
    for (i, _) in code.match_indices("cargo xtask ") {
        let args = &code[i + "cargo xtask ".len()..];
        let args = &args[..command_end(args)];
        let mut words = args.split_whitespace();
        let Some(sub) = words.next() else { continue };
        let plain = sub.trim_matches(|c: char| c == '`' || c == ',' || c == ')');
        let is_name = |w: &str| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'-' || b.is_ascii_digit())
        };
        if plain.split('|').all(is_name) {
            for s in plain.split('|') {
                if !xtask.commands.contains(s) {
                    bad.push(format!("`cargo xtask {s}`: no such command"));
                }
            }
        }
        let words: Vec<&str> = words.take_while(|&w| w != "--").collect();
        for f in words.iter().filter_map(|w| flag(w)) {
            if !xtask.flags.contains(&f) {
                bad.push(format!("`cargo xtask {plain} ... {f}`: no such flag"));
            }
        }
        // `--board NAME`: a file in boards/ (a placeholder in capitals is not checked).
        for pair in words
            .windows(2)
            .filter(|p| p[0].trim_start_matches('[') == "--board")
        {
            let name = pair[1].trim_end_matches([']', ',', '`', ')']);
            if name.bytes().any(|b| b.is_ascii_lowercase()) && !boards().contains(name) {
                bad.push(format!(
                    "`cargo xtask {plain} --board {name}`: no such board"
                ));
            }
        }
    }
    for (i, _) in code.match_indices("lmboot-host ") {
        if code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '/' || c == '-') {
            continue;
        }
        let args = &code[i + "lmboot-host ".len()..];
        let args = &args[..command_end(args)];
        let words = args.split_whitespace().skip_while(|&w| w == "--");
        for f in words.filter_map(flag) {
            if !host.flags.contains(&f) {
                bad.push(format!("`lmboot-host ... {f}`: no such flag"));
            }
        }
    }
    bad
}

/// Every problem of every page: broken links, unknown commands and flags.
pub fn check_pages() -> Result<Vec<String>, String> {
    let (xtask, host) = usages()?;
    let mut bad = Vec::new();
    for page in pages() {
        bad.extend(check_links(&page));
        let md = std::fs::read_to_string(&page).map_err(|e| format!("{}: {e}", page.display()))?;
        let (_, code) = split_code(&md);
        for c in code {
            for b in check_commands(&c, &xtask, &host) {
                bad.push(format!("{}: {b}", shown(&page)));
            }
        }
    }
    Ok(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_and_code() {
        assert_eq!(
            slug("On a 32-bit board: Raspberry Pi 2, Orange Pi Zero / One / PC"),
            "on-a-32-bit-board-raspberry-pi-2-orange-pi-zero--one--pc"
        );
        assert_eq!(slug("The card: `lmboot.txt`"), "the-card-lmboottxt");
        let (prose, code) = split_code("a `b [x](y)` [c](d.md#e)\n\n    cargo xtask qemu --x\n");
        assert_eq!(links(&prose), [("d.md".into(), "e".into())]);
        assert_eq!(code, ["b [x](y)", "    cargo xtask qemu --x"]);
    }

    #[test]
    fn commands_and_flags() {
        let x = Usage::parse(
            "usage\n\ncommands:\n  qemu   boot [--board B]\n  image  x\n    --set K\n",
        );
        let h = Usage::parse("  --model FILE\n");
        assert_eq!(x.commands.iter().collect::<Vec<_>>(), ["image", "qemu"]);
        assert!(check_commands("cargo xtask image|qemu --board rpi3 # --nope", &x, &h).is_empty());
        assert!(check_commands("cargo xtask qemu [--board B]", &x, &h).is_empty());
        let bad = check_commands("cargo xtask image --board orangepi-pc", &x, &h);
        assert_eq!(
            bad,
            ["`cargo xtask image --board orangepi-pc`: no such board"]
        );
        let bad = check_commands(
            "cargo xtask bench --board B -- --y; lmboot-host -- --model m --mem 1",
            &x,
            &h,
        );
        assert_eq!(
            bad,
            [
                "`cargo xtask bench`: no such command",
                "`lmboot-host ... --mem`: no such flag"
            ]
        );
    }
}
