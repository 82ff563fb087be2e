//! `cargo xtask house`: the rules that keep the code easy to live in, measured.
//!
//! - No non-test function over [`MAX_FN_LINES`] lines, outside the SIMD kernel files (a kernel's
//!   unrolled loop may be long for a reason; those are listed apart).
//! - No import cycle inside a crate: among the children of any module, no two reach each other
//!   through `crate::`, `super::` or `self::` paths (uses and paths in code alike). A module using
//!   its own ancestor or descendant is the usual parent/child layout and does not count; test
//!   code (`#[cfg(test)]`, `#[test]`) does not count either.
//! - No import up the layers through a re-export: a path naming an item through a `use` (a
//!   `pub use` in `lib.rs`, or any module's `use`, which its descendants see) counts as an
//!   import of the module that defines the item, and that module must not import the importer
//!   back, directly or through others (a re-export must not hide a cycle).
//! - Where a crate's `lib.rs` documents its layers (a numbered list under `# Layers`, lowest
//!   first, naming the top modules as links), every top module is listed and imports only
//!   modules on lines above its own (re-exports followed), so the list stays true.
//! - At most [`MAX_TYPE_NAMERS`] files outside the kernel sets' own files name one weight type
//!   (`Q5_1`, the type the table was built around): the type table and its tests.
//!
//! The files are parsed with `syn`, so a brace in a string or a comment does not skew a length.

use proc_macro2::Span;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The longest a non-test function may be, in lines.
pub const MAX_FN_LINES: usize = 120;
/// How many files outside the kernel sets' own files may name `Q5_1`.
pub const MAX_TYPE_NAMERS: usize = 2;

/// The crates measured (folders of the workspace with a `src/`).
const CRATES: [&str; 9] = [
    "inference",
    "drivers",
    "runtime",
    "boards",
    "kernel",
    "xtask",
    "host",
    "models",
    "ring",
];

/// The kernel sets' own files: each set's file and its folder, and the scalar reference.
const SET_FILES: [&str; 6] = ["neon", "avx2", "rvv", "xtheadvector", "neon32", "scalar"];

/// One long function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongFn {
    pub file: String,
    pub line: usize,
    pub name: String,
    pub lines: usize,
    /// In a SIMD kernel file (allowed).
    pub kernel: bool,
}

/// One import cycle: the crate, the parent module, and the edges with a place that makes each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    pub krate: String,
    pub parent: String,
    pub edges: Vec<(String, String, String)>,
}

/// One import up the layers: a module naming, through a re-export, an item of a module that
/// imports it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upward {
    pub krate: String,
    /// The file and line of the import.
    pub at: String,
    /// The path as written, from the crate root (`crate::Kernels`).
    pub import: String,
    /// The importing module and the module that defines the item.
    pub from: String,
    pub to: String,
}

/// What the measure found.
#[derive(Debug, Default)]
pub struct Report {
    pub files: usize,
    pub long_fns: Vec<LongFn>,
    pub cycles: Vec<Cycle>,
    pub upward: Vec<Upward>,
    /// Where a crate's documented layer order (`# Layers` in `lib.rs`) and its imports part.
    pub layers: Vec<String>,
    pub type_namers: Vec<String>,
}

impl Report {
    /// The broken rules, one line each (empty: all kept).
    pub fn broken(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .long_fns
            .iter()
            .filter(|f| !f.kernel)
            .map(|f| {
                format!(
                    "{}:{} {} is {} lines (at most {MAX_FN_LINES})",
                    f.file, f.line, f.name, f.lines
                )
            })
            .collect();
        for c in &self.cycles {
            let mods: BTreeSet<&str> = c.edges.iter().map(|e| e.0.as_str()).collect();
            out.push(format!(
                "import cycle in {} among {}: {}",
                c.krate,
                if c.parent.is_empty() {
                    "the crate's top modules".to_string()
                } else {
                    format!("the children of {}", c.parent)
                },
                mods.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        for u in &self.upward {
            out.push(format!(
                "upward import in {}: {} {} in {} names an item of {} through a re-export, and {} imports {}",
                u.krate, u.at, u.import, u.from, u.to, u.to, u.from
            ));
        }
        out.extend(self.layers.iter().cloned());
        if self.type_namers.len() > MAX_TYPE_NAMERS {
            out.push(format!(
                "{} files outside the kernel sets name Q5_1 (at most {MAX_TYPE_NAMERS})",
                self.type_namers.len()
            ));
        }
        out
    }

    /// The report as text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{} files read", self.files);
        let (kernel, other): (Vec<_>, Vec<_>) = self.long_fns.iter().partition(|f| f.kernel);
        let _ = writeln!(
            s,
            "\nnon-test functions over {MAX_FN_LINES} lines: {}",
            other.len()
        );
        for f in &other {
            let _ = writeln!(s, "  {}:{} {} ({} lines)", f.file, f.line, f.name, f.lines);
        }
        let _ = writeln!(s, "in SIMD kernel files (allowed): {}", kernel.len());
        for f in &kernel {
            let _ = writeln!(s, "  {}:{} {} ({} lines)", f.file, f.line, f.name, f.lines);
        }
        let _ = writeln!(s, "\nimport cycles: {}", self.cycles.len());
        for c in &self.cycles {
            let _ = writeln!(s, "  {} ({}):", c.krate, display_mod(&c.parent));
            for (a, b, at) in &c.edges {
                let _ = writeln!(s, "    {a} -> {b}  ({at})");
            }
        }
        let _ = writeln!(
            s,
            "\nimports through a re-export up the layers: {}",
            self.upward.len()
        );
        for u in &self.upward {
            let _ = writeln!(
                s,
                "  {} {}: {} -> {} ({})",
                u.krate, u.import, u.from, u.to, u.at
            );
        }
        let _ = writeln!(
            s,
            "\nimports against a documented layer order: {}",
            self.layers.len()
        );
        for l in &self.layers {
            let _ = writeln!(s, "  {l}");
        }
        let _ = writeln!(
            s,
            "\nfiles outside the kernel sets naming Q5_1: {}",
            self.type_namers.len()
        );
        for f in &self.type_namers {
            let _ = writeln!(s, "  {f}");
        }
        s
    }
}

fn display_mod(m: &str) -> &str {
    if m.is_empty() {
        "crate root"
    } else {
        m
    }
}

/// Measure the workspace at `root`.
pub fn measure(root: &Path) -> Result<Report, String> {
    let mut report = Report::default();
    for krate in CRATES {
        let src = root.join(krate).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files)?;
        files.sort();
        let mut parsed = Vec::new();
        let mut layers = None;
        for f in &files {
            let rel = f
                .strip_prefix(root)
                .unwrap_or(f)
                .to_string_lossy()
                .into_owned();
            let text = fs::read_to_string(f).map_err(|e| format!("{rel}: {e}"))?;
            report.files += 1;
            if rel.starts_with("inference/src/quant/")
                && !is_set_file(&rel)
                && text.to_ascii_lowercase().contains("q5_1")
            {
                report.type_namers.push(rel.clone());
            }
            let file = syn::parse_file(&text).map_err(|e| format!("{rel}: {e}"))?;
            let mut v = Visitor::new(module_of(f.strip_prefix(&src).unwrap_or(f)));
            v.visit_file(&file);
            if rel.ends_with("src/lib.rs") {
                layers = documented_layers(&text).map(|l| (rel.clone(), l));
            }
            parsed.push((rel, v));
        }
        // Files declared by `#[cfg(test)] mod x;` are test code.
        let tests: Vec<Vec<String>> = parsed
            .iter()
            .flat_map(|(_, v)| v.test_children.iter().cloned())
            .collect();
        let mut graph = Graph::default();
        for (rel, v) in parsed {
            if tests.iter().any(|t| v.module.starts_with(t)) {
                continue;
            }
            let kernel = is_kernel_file(&rel);
            for (name, line, lines) in v.fns {
                if lines > MAX_FN_LINES {
                    report.long_fns.push(LongFn {
                        file: rel.clone(),
                        line,
                        name,
                        lines,
                        kernel,
                    });
                }
            }
            // `src/bin/*` are crates of their own; their paths do not join this graph.
            if v.module.first().map(String::as_str) != Some("bin") {
                graph.files.push(File {
                    module: v.module,
                    file: rel,
                    paths: v.paths,
                    uses: v.uses,
                });
            }
        }
        report.cycles.extend(graph.cycles(krate));
        report.upward.extend(graph.upward(krate));
        if let Some((file, layers)) = layers {
            report.layers.extend(graph.against_layers(&file, &layers));
        }
    }
    // Files outside `inference/src` that name the type (the integration tests' helpers).
    let mut tests = Vec::new();
    rust_files(&root.join("tests"), &mut tests)?;
    for f in tests {
        let text = fs::read_to_string(&f).unwrap_or_default();
        if text.to_ascii_lowercase().contains("q5_1") {
            let rel = f.strip_prefix(root).unwrap_or(&f).to_string_lossy();
            report.type_namers.push(rel.into_owned());
        }
    }
    Ok(report)
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in entries {
        let p = e.map_err(|e| e.to_string())?.path();
        if p.is_dir() {
            rust_files(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// The module path of a file relative to its crate's `src/`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn is_set_file(rel: &str) -> bool {
    SET_FILES.iter().any(|s| {
        let base = format!("inference/src/quant/{s}");
        rel == format!("{base}.rs") || rel.starts_with(&format!("{base}/"))
    })
}

/// The SIMD kernels' files: each vector set's file and folder (not the scalar reference).
fn is_kernel_file(rel: &str) -> bool {
    is_set_file(rel) && !rel.starts_with("inference/src/quant/scalar")
}

fn is_test_attr(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if a.path().is_ident("test") {
            return true;
        }
        if !a.path().is_ident("cfg") {
            return false;
        }
        let t = quote::ToTokens::to_token_stream(&a.meta).to_string();
        t.contains("test") && !t.contains("not")
    })
}

fn line_of(span: Span) -> usize {
    span.start().line
}

/// Collects a file's functions (name, first line, length) and the module paths it names.
struct Visitor {
    module: Vec<String>,
    /// Inline modules entered (for `super::` inside them).
    inline: Vec<String>,
    owner: Option<String>,
    /// Modules of other files declared here as test code (`#[cfg(test)] mod x;`).
    test_children: Vec<Vec<String>>,
    fns: Vec<(String, usize, usize)>,
    /// (path relative to where it stands, resolved later; line)
    paths: Vec<(Vec<String>, usize)>,
    /// The names its `use` items bring into the file's module (visible to the module's
    /// descendants, so a re-export): (name, the path as written).
    uses: Vec<(String, Vec<String>)>,
}

impl Visitor {
    fn new(module: Vec<String>) -> Self {
        Visitor {
            module,
            inline: Vec::new(),
            owner: None,
            test_children: Vec::new(),
            fns: Vec::new(),
            paths: Vec::new(),
            uses: Vec::new(),
        }
    }

    fn function(&mut self, name: &syn::Ident, block: &syn::Block, start: Span) {
        let name = match &self.owner {
            Some(o) => format!("{o}::{name}"),
            None => name.to_string(),
        };
        let first = line_of(start);
        let last = block.brace_token.span.close().end().line;
        self.fns.push((name, first, last + 1 - first));
    }

    /// A path as seen from the file's module (inline modules folded in), if it names one.
    fn record(&mut self, segs: Vec<String>, line: usize) {
        let mut here: Vec<String> = self.module.clone();
        here.extend(self.inline.iter().cloned());
        if let Some(abs) = absolute(here, &segs) {
            self.paths.push((abs, line));
        }
    }
}

/// A `crate::`, `self::` or `super::` path written in module `here`, from the crate root.
fn absolute(mut here: Vec<String>, segs: &[String]) -> Option<Vec<String>> {
    match segs.first()?.as_str() {
        "crate" => Some(segs[1..].to_vec()),
        "self" => {
            here.extend(segs[1..].iter().cloned());
            Some(here)
        }
        "super" => {
            let ups = segs.iter().take_while(|s| *s == "super").count();
            if ups > here.len() {
                return None;
            }
            here.truncate(here.len() - ups);
            here.extend(segs[ups..].iter().cloned());
            Some(here)
        }
        _ => None,
    }
}

/// A `use` tree's paths, each with the name it brings in (none for a glob or `_`).
type UsePaths = Vec<(Vec<String>, Option<String>)>;

fn flatten_use(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut UsePaths) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut v = prefix.clone();
            let name = n.ident.to_string();
            v.push(name.clone());
            // `use a::b::{self}` names `b`.
            let name = if name == "self" {
                v.pop();
                prefix.last().cloned()
            } else {
                Some(name)
            };
            out.push((v, name));
        }
        syn::UseTree::Rename(r) => {
            let mut v = prefix.clone();
            v.push(r.ident.to_string());
            let alias = r.rename.to_string();
            out.push((v, (alias != "_").then_some(alias)));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

impl<'ast> Visit<'ast> for Visitor {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if is_test_attr(&m.attrs) {
            if m.content.is_none() {
                let mut child = self.module.clone();
                child.extend(self.inline.iter().cloned());
                child.push(m.ident.to_string());
                self.test_children.push(child);
            }
            return;
        }
        self.inline.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.inline.pop();
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if is_test_attr(&f.attrs) {
            return;
        }
        self.function(&f.sig.ident, &f.block, f.sig.fn_token.span);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if is_test_attr(&i.attrs) {
            return;
        }
        let ty = quote::ToTokens::to_token_stream(&i.self_ty)
            .to_string()
            .replace(' ', "");
        let before = self.owner.replace(ty);
        syn::visit::visit_item_impl(self, i);
        self.owner = before;
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test_attr(&f.attrs) {
            return;
        }
        self.function(&f.sig.ident, &f.block, f.sig.fn_token.span);
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(b) = &f.default {
            self.function(&f.sig.ident, b, f.sig.fn_token.span);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if is_test_attr(&u.attrs) {
            return;
        }
        let mut out = Vec::new();
        flatten_use(&u.tree, &mut Vec::new(), &mut out);
        let line = line_of(u.use_token.span);
        for (p, name) in out {
            // A name brought into an inline module is not seen from the file's module.
            if self.inline.is_empty() {
                if let Some(name) = name {
                    self.uses.push((name, p.clone()));
                }
            }
            self.record(p, line);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() >= 2 {
            let segs = p.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = p.segments.first().map_or(0, |s| line_of(s.ident.span()));
            self.record(segs, line);
        }
        syn::visit::visit_path(self, p);
    }
}

/// One file of a crate: its module, its name, the paths it names (from the crate root, with a
/// line) and the names its `use` items bring in (name, path as written).
struct File {
    module: Vec<String>,
    file: String,
    paths: Vec<(Vec<String>, usize)>,
    uses: Vec<(String, Vec<String>)>,
}

/// One crate's files.
#[derive(Default)]
struct Graph {
    files: Vec<File>,
}

/// Edges between the children of each module: parent -> (from child, to child) -> a place that
/// makes the edge.
type Edges = BTreeMap<Vec<String>, BTreeMap<(String, String), String>>;

/// An edge found: the parent, the two children, the place, and the path when it went through a
/// re-export.
struct Edge {
    parent: Vec<String>,
    from: String,
    to: String,
    at: String,
    reexported: Option<Vec<String>>,
}

impl Graph {
    /// The module files of the crate.
    fn modules(&self) -> BTreeSet<Vec<String>> {
        self.files.iter().map(|f| f.module.clone()).collect()
    }

    /// What the names brought in by `use` stand for: `module::name` -> the path it names, from
    /// the crate root (a `use` in a module is seen by its descendants, so `crate::Name` after
    /// `pub use quant::Name;` in `lib.rs` names `quant::Name`).
    fn reexports(&self, modules: &BTreeSet<Vec<String>>) -> BTreeMap<Vec<String>, Vec<String>> {
        let mut out = BTreeMap::new();
        for f in &self.files {
            for (name, segs) in &f.uses {
                let mut key = f.module.clone();
                key.push(name.clone());
                let target = absolute(f.module.clone(), segs).or_else(|| {
                    // `use child::Name;` (2018 paths start at the module's own names).
                    let mut child = f.module.clone();
                    child.push(segs.first()?.clone());
                    modules.contains(&child).then(|| {
                        let mut t = f.module.clone();
                        t.extend(segs.iter().cloned());
                        t
                    })
                });
                match target {
                    Some(t) if t != key && !modules.contains(&key) => {
                        out.insert(key, t);
                    }
                    _ => {}
                }
            }
        }
        out
    }

    /// Every edge between two children of one module, each path resolved to the module that
    /// defines what it names (re-exports followed).
    fn edges(&self) -> Vec<Edge> {
        let modules = self.modules();
        let reexports = self.reexports(&modules);
        let longest = |path: &[String]| {
            (0..=path.len())
                .rev()
                .find(|&n| modules.contains(&path[..n]))
                .unwrap_or(0)
        };
        let mut out = Vec::new();
        for f in &self.files {
            for (path, line) in &f.paths {
                let mut p = path.clone();
                let mut reexported = None;
                // A few steps: a re-export of a re-export; a loop of them names nothing.
                for _ in 0..8 {
                    let n = longest(&p);
                    let Some(t) = (n < p.len()).then(|| reexports.get(&p[..=n])).flatten() else {
                        break;
                    };
                    let mut next = t.clone();
                    next.extend(p[n + 1..].iter().cloned());
                    p = next;
                    reexported = Some(path.clone());
                }
                let to = &p[..longest(&p)];
                let from = &f.module;
                let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
                if common == from.len() || common == to.len() {
                    continue; // self, ancestor or descendant
                }
                out.push(Edge {
                    parent: from[..common].to_vec(),
                    from: from[common].clone(),
                    to: to[common].clone(),
                    at: format!("{}:{line}", f.file),
                    reexported,
                });
            }
        }
        out
    }

    /// The edges, grouped by parent; `all` false leaves out those made through a re-export.
    fn edge_map(edges: &[Edge], all: bool) -> Edges {
        let mut out: Edges = BTreeMap::new();
        for e in edges.iter().filter(|e| all || e.reexported.is_none()) {
            out.entry(e.parent.clone())
                .or_default()
                .entry((e.from.clone(), e.to.clone()))
                .or_insert_with(|| e.at.clone());
        }
        out
    }

    /// The import cycles: for every module, the strongly connected groups among its children
    /// (paths as written; a cycle made through a re-export is an upward import).
    fn cycles(&self, krate: &str) -> Vec<Cycle> {
        let mut out = Vec::new();
        for (parent, es) in Self::edge_map(&self.edges(), false) {
            for group in strong_groups(&es) {
                let edges = es
                    .iter()
                    .filter(|((a, b), _)| group.contains(a) && group.contains(b))
                    .map(|((a, b), at)| (a.clone(), b.clone(), at.clone()))
                    .collect();
                out.push(Cycle {
                    krate: krate.to_string(),
                    parent: parent.join("::"),
                    edges,
                });
            }
        }
        out
    }

    /// The imports through a re-export of an item whose module imports the importer back
    /// (directly or through others): the re-export hides a cycle.
    fn upward(&self, krate: &str) -> Vec<Upward> {
        let edges = self.edges();
        let all = Self::edge_map(&edges, true);
        let mut out = Vec::new();
        for e in &edges {
            let Some(path) = &e.reexported else { continue };
            let Some(es) = all.get(&e.parent) else {
                continue;
            };
            if !reach(es, &e.to).contains(&e.from) {
                continue;
            }
            let module = |m: &str| {
                let mut v = e.parent.clone();
                v.push(m.to_string());
                v.join("::")
            };
            out.push(Upward {
                krate: krate.to_string(),
                at: e.at.clone(),
                import: format!("crate::{}", path.join("::")),
                from: module(&e.from),
                to: module(&e.to),
            });
        }
        out
    }
}

/// The layer order a crate root's docs give under `# Layers`: a numbered list, lowest first, each
/// item naming its modules as links (``[`name`]``); nothing when the docs have none.
fn documented_layers(text: &str) -> Option<Vec<Vec<String>>> {
    let docs = text.lines().map_while(|l| l.strip_prefix("//!"));
    let mut layers: Vec<Vec<String>> = Vec::new();
    let mut inside = false;
    for line in docs {
        let line = line.trim_start();
        if line.starts_with('#') {
            if inside && !layers.is_empty() {
                break;
            }
            inside = line == "# Layers";
            continue;
        }
        if !inside {
            continue;
        }
        let numbered = line
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if numbered {
            layers.push(Vec::new());
        } else if line.is_empty() && !layers.is_empty() {
            break;
        } else if layers.is_empty() {
            continue;
        }
        let names = line.split("[`").skip(1).filter_map(|r| r.split_once("`]"));
        if let Some(last) = layers.last_mut() {
            last.extend(names.map(|(n, _)| n.to_string()));
        }
    }
    (!layers.is_empty()).then_some(layers)
}

impl Graph {
    /// The places where the top modules' imports break the documented `layers` (lowest first):
    /// an import of a module on the same line or above, or a top module the list leaves out.
    fn against_layers(&self, file: &str, layers: &[Vec<String>]) -> Vec<String> {
        let level = |m: &str| layers.iter().position(|l| l.iter().any(|n| n == m));
        let mut out = Vec::new();
        let tops: BTreeSet<&String> = self
            .files
            .iter()
            .filter_map(|f| f.module.first())
            .filter(|m| *m != "bin")
            .collect();
        for m in tops {
            if level(m).is_none() {
                out.push(format!("{file}: the layers leave out the module {m}"));
            }
        }
        let edges = self.edges();
        let mut seen = BTreeSet::new();
        for e in edges.iter().filter(|e| e.parent.is_empty()) {
            let (Some(a), Some(b)) = (level(&e.from), level(&e.to)) else {
                continue;
            };
            if b >= a && seen.insert((&e.from, &e.to)) {
                out.push(format!(
                    "{}: {} (layer {}) imports {} (layer {}), not below it in {file}'s layers",
                    e.at,
                    e.from,
                    a + 1,
                    e.to,
                    b + 1
                ));
            }
        }
        out
    }
}

/// The nodes `start` reaches (itself included).
fn reach(edges: &BTreeMap<(String, String), String>, start: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::from([start.to_string()]);
    let mut todo = vec![start.to_string()];
    while let Some(n) = todo.pop() {
        for (a, b) in edges.keys() {
            if *a == n && seen.insert(b.clone()) {
                todo.push(b.clone());
            }
        }
    }
    seen
}

/// The groups of two or more nodes that all reach each other.
fn strong_groups(edges: &BTreeMap<(String, String), String>) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&String> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
    let all: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(edges, n))).collect();
    let mut groups: Vec<BTreeSet<String>> = Vec::new();
    for n in &nodes {
        let g: BTreeSet<String> = all[n]
            .iter()
            .filter(|m| all[*m].contains(*n))
            .cloned()
            .collect();
        if g.len() > 1 && !groups.contains(&g) {
            groups.push(g);
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_keeps_the_house_rules() {
        let r = measure(&crate::workspace_root()).unwrap();
        assert!(r.files > 150, "read only {} files", r.files);
        assert_eq!(r.broken(), Vec::<String>::new(), "\n{}", r.text());
    }

    #[test]
    fn a_module_path_comes_from_the_file_name() {
        assert_eq!(module_of(Path::new("lib.rs")), Vec::<String>::new());
        assert_eq!(module_of(Path::new("quant/mod.rs")), vec!["quant"]);
        assert_eq!(
            module_of(Path::new("quant/neon/q32.rs")),
            vec!["quant", "neon", "q32"]
        );
    }

    #[test]
    fn two_siblings_that_use_each_other_are_a_cycle_and_a_parent_is_not() {
        let file = |m: &[&str], paths: &[&[&str]]| File {
            module: m.iter().map(|s| s.to_string()).collect(),
            file: m.join("/"),
            paths: paths
                .iter()
                .map(|p| (p.iter().map(|s| s.to_string()).collect(), 1))
                .collect(),
            uses: Vec::new(),
        };
        let g = Graph {
            files: vec![
                file(&[], &[&["a", "X"]]),
                file(&["a"], &[&["b", "c", "Y"]]),
                file(&["b"], &[]),
                file(&["b", "c"], &[&["a", "Z"], &["b", "W"]]),
                file(&["d"], &[&["a", "X"]]),
            ],
        };
        let cycles = g.cycles("k");
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!(cycles[0].parent, "");
        let names: Vec<_> = cycles[0]
            .edges
            .iter()
            .map(|e| (e.0.as_str(), e.1.as_str()))
            .collect();
        assert_eq!(names, [("a", "b"), ("b", "a")]);
    }

    /// A crate from (file under `src/`, source) pairs, read as [`measure`] reads one.
    fn crate_of(files: &[(&str, &str)]) -> Graph {
        let mut g = Graph::default();
        for (path, src) in files {
            let mut v = Visitor::new(module_of(Path::new(path)));
            v.visit_file(&syn::parse_file(src).unwrap());
            g.files.push(File {
                module: v.module,
                file: path.to_string(),
                paths: v.paths,
                uses: v.uses,
            });
        }
        g
    }

    #[test]
    fn an_import_through_a_reexport_of_a_module_that_imports_back_is_upward() {
        let g = crate_of(&[
            (
                "lib.rs",
                "pub mod oom; pub mod quant; pub mod model;\n\
                 pub use oom::OutOfMemory;\npub use model::{Config as Cfg, self};\n",
            ),
            ("oom.rs", "pub struct OutOfMemory;\n"),
            // Down to `oom` through the root: allowed. Up to `model`, which uses `quant`: not.
            (
                "quant.rs",
                "use crate::OutOfMemory;\n\
                 pub fn f() -> Result<(), OutOfMemory> { Ok(()) }\n\
                 pub fn g(_: &crate::Cfg) {}\n",
            ),
            (
                "model/mod.rs",
                "mod llama;\npub use llama::Config;\nuse crate::quant::f;\n",
            ),
            ("model/llama.rs", "pub struct Config;\n"),
        ]);
        // The paths as written make no cycle: model -> quant only.
        assert_eq!(g.cycles("k"), []);
        let up = g.upward("k");
        assert_eq!(
            up,
            [Upward {
                krate: "k".into(),
                at: "quant.rs:3".into(),
                import: "crate::Cfg".into(),
                from: "quant".into(),
                to: "model".into(),
            }]
        );
        let r = Report {
            upward: up,
            ..Report::default()
        };
        assert_eq!(
            r.broken(),
            [
                "upward import in k: quant.rs:3 crate::Cfg in quant names an item of model \
              through a re-export, and model imports quant"
            ]
        );
    }

    #[test]
    fn the_documented_layers_are_read_and_checked_against_the_imports() {
        let lib = "//! A crate.\n//!\n//! # Layers\n//!\n//! Lowest first:\n//!\n\
                   //! 1. [`oom`], [`fit`] (leaves);\n//! 2. [`quant`]: the kernels, over\n\
                   //!    [`ops`];\n//! 3. [`model`] (not [`quant`]'s line: `sample`).\n//!\n\
                   //! [`after`] the list.\n//! # Other\n//! 1. [`x`]\npub mod oom;\n";
        let layers = documented_layers(lib).unwrap();
        assert_eq!(
            layers,
            [
                vec!["oom", "fit"],
                vec!["quant", "ops"],
                vec!["model", "quant"]
            ]
        );
        assert_eq!(documented_layers("//! # Other\n//! 1. [`x`]\n"), None);
        let g = crate_of(&[
            (
                "lib.rs",
                "pub mod oom; pub mod quant; pub mod model; pub mod sample;",
            ),
            ("oom.rs", ""),
            ("quant.rs", "use crate::oom::X;\n"),
            ("model.rs", "use crate::quant::Y;\nuse crate::sample::Z;\n"),
            ("sample.rs", ""),
            ("ops.rs", "use crate::quant::K;\n"),
        ]);
        let layers = [
            vec!["oom".to_string()],
            vec!["quant".into(), "ops".into()],
            vec!["model".into()],
        ];
        assert_eq!(
            g.against_layers("lib.rs", &layers),
            [
                "lib.rs: the layers leave out the module sample",
                "ops.rs:1: ops (layer 2) imports quant (layer 2), not below it in lib.rs's layers",
            ]
        );
    }

    #[test]
    fn function_lengths_skip_tests_and_count_lines() {
        let src = "fn a() {\n    1;\n}\n#[cfg(test)]\nmod t { fn long() {\n\n\n} }\n#[test]\nfn b() {}\nimpl S { fn m(&self) {\n} }\n";
        let mut v = Visitor::new(vec![]);
        v.visit_file(&syn::parse_file(src).unwrap());
        assert_eq!(
            v.fns,
            [("a".to_string(), 1, 3), ("S::m".to_string(), 11, 2)]
        );
    }
}
