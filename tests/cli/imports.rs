//! The library's imports run one way: no cycle between files, and the layers that must
//! not know each other do not.
//!
//! Every `.rs` file under `src/` (the library; `main.rs` is its own crate) is read, its
//! `use` items and the `crate::` / `super::` / `self::` paths in its code are resolved
//! to the file that defines the item, following re-exports (`pub use`), and the
//! resulting file graph must be acyclic. A parent's re-export of its own submodule
//! (`pub use child::Item` in `mod.rs`) belongs to declaring that submodule, like `mod`,
//! and is not an edge.
//!
//! Written by hand rather than with a Rust parser crate (syn): it needs only paths,
//! which a small tokenizer that skips comments and literals finds reliably, and a
//! parser would add a heavy dependency for one test.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Edges allowed for now, each with why. The coordinator removes an entry once the work
/// that removes the edge is merged; the test fails if a listed edge no longer exists,
/// so the list cannot go stale.
const ALLOWED_EDGES: &[(&str, &str, &str)] = &[];

/// Directions between parts of the library that must never exist: (from prefix, to
/// prefix, why).
const FORBIDDEN: &[(&str, &str, &str)] = &[
    (
        "scene/",
        "tui/",
        "scene files describe lessons in their own terms; the app maps them onto views",
    ),
    ("engine/", "tui/", "the engine has no terminal code"),
    ("engine/", "widgets/", "the engine has no terminal code"),
    ("kernel/", "tui/", "the kernel has no terminal code"),
    ("model/", "tui/", "the model code has no terminal code"),
    ("train/", "tui/", "the training engine has no terminal code"),
    (
        "train/",
        "widgets/",
        "the training engine has no terminal code",
    ),
    (
        "train/",
        "commands/",
        "the command drives the training engine, not the other way",
    ),
    (
        "tui/views/",
        "tui/state.rs",
        "a view never imports the app's state",
    ),
    (
        "tui/views/",
        "tui/update",
        "a view never imports the app's update (tui/update.rs and tui/update/)",
    ),
    (
        "tui/views/",
        "tui/render.rs",
        "a view never imports the app's render",
    ),
    (
        "tui/views/",
        "tui/keymap.rs",
        "a view's keys are its own (tui/keys.rs types)",
    ),
    (
        "tui/views/",
        "tui/layout.rs",
        "the app lays views out, not the other way",
    ),
    (
        "tui/views/",
        "tui/app.rs",
        "a view never imports the event loop",
    ),
    (
        "tui/views/",
        "tui/measure.rs",
        "the event loop drives the scaling worker",
    ),
    (
        "tui/context.rs",
        "tui/state.rs",
        "the app's state is built on the context",
    ),
    (
        "tui/component.rs",
        "tui/views/",
        "the trait is below the views",
    ),
];

// ---- reading the source -------------------------------------------------------------

/// The source with comments removed and string/char literals emptied, so paths in
/// them are not mistaken for code. Line breaks are kept, so line numbers stay right.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let keep_newlines = |s: &[u8], out: &mut String| {
        for &c in s {
            if c == b'\n' {
                out.push('\n');
            }
        }
    };
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let start = i;
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            keep_newlines(&b[start..i.min(b.len())], &mut out);
        } else if c == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && (i == 0 || !is_ident(b[i - 1]))
        {
            // Raw string r"..." or r#"..."#.
            let start = i;
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&b'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            keep_newlines(&b[start..j.min(b.len())], &mut out);
            out.push_str("\"\"");
            i = j;
        } else if c == b'"' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            keep_newlines(&b[start..i.min(b.len())], &mut out);
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal ('x', '\n', '{') or a lifetime ('a).
            let end = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&x| x == b'\'')
                    .map(|p| i + 3 + p)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 3)
            } else {
                // A multi-byte char: find the closing quote within a few bytes.
                let ch_len = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch_len) == Some(&b'\'')).then_some(i + 2 + ch_len)
            };
            match end {
                Some(e) => {
                    out.push_str("' '");
                    i = e;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = src[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// One file of the library.
struct File {
    /// Relative to src/, with '/' separators.
    name: String,
    /// Its module path from the crate root.
    module: Vec<String>,
    code: String,
}

fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs").to_string();
    if stem != "mod" && stem != "lib" {
        parts.push(stem);
    }
    parts
}

fn read_files(root: &Path) -> Vec<File> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().to_path_buf();
                if rel == Path::new("main.rs") {
                    continue;
                }
                let src = std::fs::read_to_string(&path).unwrap();
                out.push(File {
                    name: rel.to_string_lossy().replace('\\', "/"),
                    module: module_of(&rel),
                    code: code_only(&src),
                });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

// ---- paths in a file ------------------------------------------------------------------

/// A path a file names: the module it is written in (inline `mod x { }` blocks add to the
/// file's module), whether it is a `pub use`, and its segments as written.
#[derive(Debug, Clone)]
struct Named {
    line: usize,
    scope: Vec<String>,
    reexport: bool,
    /// For a `use` item: the name it brings in (after `as`).
    alias: Option<String>,
    segments: Vec<String>,
    glob: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Sep, // ::
    Punct(char),
}

fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if is_ident(c) {
            let s = i;
            while i < b.len() && is_ident(b[i]) {
                i += 1;
            }
            out.push((Tok::Ident(code[s..i].to_string()), line));
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push((Tok::Sep, line));
            i += 2;
        } else {
            let ch = code[i..].chars().next().unwrap();
            out.push((Tok::Punct(ch), line));
            i += ch.len_utf8();
        }
    }
    out
}

/// Expand a use tree starting at `toks[*i]` into (segments, alias, glob) leaves.
fn use_tree(
    toks: &[(Tok, usize)],
    i: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>, bool)>,
) {
    let mut segs = prefix;
    loop {
        match toks.get(*i).map(|t| &t.0) {
            Some(Tok::Ident(id)) if id == "as" => {
                *i += 1;
                let alias = match toks.get(*i).map(|t| &t.0) {
                    Some(Tok::Ident(a)) => a.clone(),
                    _ => String::new(),
                };
                *i += 1;
                out.push((segs, Some(alias), false));
                return;
            }
            Some(Tok::Ident(id)) => {
                segs.push(id.clone());
                *i += 1;
            }
            Some(Tok::Sep) => *i += 1,
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push((segs, None, true));
                return;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.0) {
                        Some(Tok::Punct('}')) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *i += 1,
                        None => return,
                        _ => use_tree(toks, i, segs.clone(), out),
                    }
                }
            }
            _ => {
                if !segs.is_empty() {
                    out.push((segs, None, false));
                }
                return;
            }
        }
    }
}

fn named_paths(file: &File) -> Vec<Named> {
    let toks = tokens(&file.code);
    let mut out = Vec::new();
    // Inline modules: (name, brace depth at which they close).
    let mut scope: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let scope_of = |scope: &[(String, usize)]| -> Vec<String> {
        let mut m = file.module.clone();
        m.extend(scope.iter().map(|(n, _)| n.clone()));
        m
    };
    while i < toks.len() {
        let (tok, line) = (&toks[i].0, toks[i].1);
        match tok {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if scope.last().is_some_and(|(_, d)| *d == depth) {
                    scope.pop();
                }
                i += 1;
            }
            Tok::Ident(k) if k == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Punct('{'), _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    scope.push((name.clone(), depth));
                    depth += 1;
                    i += 3;
                } else {
                    i += 1;
                }
            }
            Tok::Ident(k) if k == "use" => {
                let reexport = i > 0
                    && (matches!(&toks[i - 1].0, Tok::Ident(p) if p == "pub")
                        || matches!(&toks[i - 1].0, Tok::Punct(')')));
                i += 1;
                let mut leaves = Vec::new();
                use_tree(&toks, &mut i, Vec::new(), &mut leaves);
                for (segments, alias, glob) in leaves {
                    out.push(Named {
                        line,
                        scope: scope_of(&scope),
                        reexport,
                        alias,
                        segments,
                        glob,
                    });
                }
            }
            // A path in code: crate::, super::, self::, or a relative one (`child::item`;
            // `absolute` keeps it only if `child` is a submodule).
            Tok::Ident(k)
                if matches!(toks.get(i + 1), Some((Tok::Sep, _)))
                    && !(i > 0 && matches!(toks[i - 1].0, Tok::Sep)) =>
            {
                let mut segments = vec![k.clone()];
                let mut j = i + 1;
                while let (Some((Tok::Sep, _)), Some((Tok::Ident(s), _))) =
                    (toks.get(j), toks.get(j + 1))
                {
                    segments.push(s.clone());
                    j += 2;
                }
                out.push(Named {
                    line,
                    scope: scope_of(&scope),
                    reexport: false,
                    alias: None,
                    segments,
                    glob: false,
                });
                i = j;
            }
            _ => i += 1,
        }
    }
    out
}

// ---- resolving paths to files ---------------------------------------------------------

struct Crate {
    files: Vec<File>,
    by_module: HashMap<Vec<String>, usize>,
    /// Per file: name -> absolute path of what it re-exports under that name; and globs.
    reexports: Vec<HashMap<String, Vec<String>>>,
    globs: Vec<Vec<Vec<String>>>,
    named: Vec<Vec<Named>>,
}

/// The absolute module path of a path written in `scope`, or None for other crates.
fn absolute(crate_: &Crate, scope: &[String], segments: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = scope.to_vec();
    let mut rest = segments;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A relative path names a submodule (or an item) of the current module;
            // anything else is another crate.
            let mut child = base.clone();
            child.push(first.to_string());
            if !crate_.by_module.contains_key(&child) {
                return None;
            }
        }
        None => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

impl Crate {
    fn new(files: Vec<File>) -> Crate {
        let by_module = files
            .iter()
            .enumerate()
            .map(|(k, f)| (f.module.clone(), k))
            .collect();
        let mut c = Crate {
            named: files.iter().map(named_paths).collect(),
            files,
            by_module,
            reexports: Vec::new(),
            globs: Vec::new(),
        };
        for k in 0..c.files.len() {
            let mut map = HashMap::new();
            let mut globs = Vec::new();
            for n in c.named[k].iter().filter(|n| n.reexport) {
                let Some(abs) = absolute(&c, &n.scope, &n.segments) else {
                    continue;
                };
                if n.glob {
                    globs.push(abs);
                } else {
                    let name = n
                        .alias
                        .clone()
                        .unwrap_or_else(|| abs.last().unwrap().clone());
                    map.insert(name, abs);
                }
            }
            c.reexports.push(map);
            c.globs.push(globs);
        }
        c
    }

    /// The file that defines what `path` (absolute) names.
    fn file_of(&self, path: &[String], hops: usize) -> Option<usize> {
        let (file, depth) = (0..=path.len())
            .rev()
            .find_map(|d| self.by_module.get(&path[..d]).map(|&f| (f, d)))?;
        if hops > 16 || depth == path.len() {
            return Some(file);
        }
        let item = &path[depth];
        if let Some(target) = self.reexports[file].get(item) {
            let mut t = target.clone();
            t.extend(path[depth + 1..].iter().cloned());
            return self.file_of(&t, hops + 1).or(Some(file));
        }
        for g in &self.globs[file] {
            let mut t = g.clone();
            t.extend(path[depth..].iter().cloned());
            if let Some(f) = self.file_of(&t, hops + 1)
                && f != self.by_module[g.as_slice()]
            {
                return Some(f);
            }
        }
        Some(file)
    }

    /// Every edge file -> file, with the first line that makes it.
    fn edges(&self) -> BTreeMap<(usize, usize), usize> {
        let mut out = BTreeMap::new();
        for (k, named) in self.named.iter().enumerate() {
            for n in named {
                let Some(abs) = absolute(self, &n.scope, &n.segments) else {
                    continue;
                };
                // A parent's re-export of its own submodule is part of declaring it.
                if n.reexport && abs.starts_with(&self.files[k].module) {
                    continue;
                }
                let target = if n.glob {
                    self.by_module.get(&abs).copied()
                } else {
                    self.file_of(&abs, 0)
                };
                if let Some(t) = target
                    && t != k
                {
                    out.entry((k, t)).or_insert(n.line);
                }
            }
        }
        out
    }
}

fn library() -> Crate {
    // ATTNVIZ_IMPORTS_SRC points the check at another tree (e.g. an older checkout).
    let root = std::env::var_os("ATTNVIZ_IMPORTS_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src"));
    Crate::new(read_files(&root))
}

/// Strongly connected components with more than one file (Tarjan's algorithm).
fn cycles(n: usize, adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct T<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &t.adj[v] {
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(i) if t.on[w] => t.low[v] = t.low[v].min(i),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        adj,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    t.out
}

fn allowed(from: &str, to: &str) -> bool {
    ALLOWED_EDGES.iter().any(|(f, t, _)| *f == from && *t == to)
}

#[test]
fn no_import_cycle_between_files() {
    let c = library();
    let edges = c.edges();
    let n = c.files.len();
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges.keys() {
        if !allowed(&c.files[a].name, &c.files[b].name) {
            adj[a].push(b);
        }
    }
    let found = cycles(n, &adj);
    let report: Vec<String> = found
        .iter()
        .map(|comp| {
            let set: BTreeSet<usize> = comp.iter().copied().collect();
            let lines: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| set.contains(a) && set.contains(b) && adj[*a].contains(b))
                .map(|((a, b), line)| {
                    format!("  {}:{line} -> {}", c.files[*a].name, c.files[*b].name)
                })
                .collect();
            format!(
                "a cycle through {} files:\n{}",
                comp.len(),
                lines.join("\n")
            )
        })
        .collect();
    assert!(report.is_empty(), "{}", report.join("\n"));
}

#[test]
fn allowed_edges_still_exist() {
    let c = library();
    let edges: BTreeSet<(String, String)> = c
        .edges()
        .keys()
        .map(|&(a, b)| (c.files[a].name.clone(), c.files[b].name.clone()))
        .collect();
    for (from, to, why) in ALLOWED_EDGES {
        assert!(
            edges.contains(&(from.to_string(), to.to_string())),
            "{from} no longer imports {to} ({why}): remove it from ALLOWED_EDGES"
        );
    }
}

#[test]
fn layers_do_not_import_upwards() {
    let c = library();
    let mut bad = Vec::new();
    for (&(a, b), line) in &c.edges() {
        let (from, to) = (&c.files[a].name, &c.files[b].name);
        for (f, t, why) in FORBIDDEN {
            if from.starts_with(f) && to.starts_with(t) {
                bad.push(format!("{from}:{line} imports {to}: {why}"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

// ---- the checker itself ---------------------------------------------------------------

fn crate_of(files: &[(&str, &str)]) -> Crate {
    Crate::new(
        files
            .iter()
            .map(|(name, src)| File {
                name: name.to_string(),
                module: module_of(Path::new(name)),
                code: code_only(src),
            })
            .collect(),
    )
}

fn edge_names(c: &Crate) -> BTreeSet<(String, String)> {
    c.edges()
        .keys()
        .map(|&(a, b)| (c.files[a].name.clone(), c.files[b].name.clone()))
        .collect()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

#[test]
fn the_checker_finds_a_cycle_through_super_and_reexports() {
    let c = crate_of(&[
        ("lib.rs", "pub mod a;"),
        (
            "a/mod.rs",
            "mod b; mod c; mod d; pub use c::Thing; static X: u8 = d::Y;",
        ),
        (
            "a/d.rs",
            "pub static Y: u8 = 1; fn f() { let v = Vec::<u8>::new(); }",
        ),
        ("a/b.rs", "use super::Thing; fn f() {}"),
        (
            "a/c.rs",
            "pub struct Thing; fn g() { crate::a::b::f(); } // use crate::nothing::Here;",
        ),
    ]);
    let e = edge_names(&c);
    // super::Thing is c's Thing, through a's re-export; a's own re-export is no edge.
    assert!(e.contains(&pair("a/b.rs", "a/c.rs")), "{e:?}");
    assert!(e.contains(&pair("a/c.rs", "a/b.rs")), "{e:?}");
    assert!(!e.contains(&pair("a/mod.rs", "a/c.rs")), "{e:?}");
    // A relative path in code to a submodule is an edge.
    assert!(e.contains(&pair("a/mod.rs", "a/d.rs")), "{e:?}");
    let n = c.files.len();
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in c.edges().keys() {
        adj[a].push(b);
    }
    assert_eq!(cycles(n, &adj).len(), 1);
}

#[test]
fn the_checker_ignores_comments_strings_and_other_crates() {
    let c = crate_of(&[
        ("lib.rs", "pub mod a; pub mod b;"),
        (
            "a.rs",
            r#"use std::fmt; use ratatui::Frame; const S: &str = "crate::b::x"; /* crate::b::y */ fn f() { let c = '{'; }"#,
        ),
        (
            "b.rs",
            "#[cfg(test)] mod tests { use super::*; use crate::a::f; } fn x() {}",
        ),
    ]);
    let e = edge_names(&c);
    assert!(!e.contains(&pair("a.rs", "b.rs")), "{e:?}");
    // An inline test module's `super` is its own file; its crate:: path is real.
    assert!(e.contains(&pair("b.rs", "a.rs")), "{e:?}");
    assert!(!e.contains(&pair("b.rs", "lib.rs")), "{e:?}");
}
