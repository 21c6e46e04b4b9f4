//! The workspace's file-level import graph, read from the sources themselves: which `.rs` file
//! names an item of which other file of the same crate (`use crate::…`, `super::…`, child
//! modules, inline `crate::a::b` paths). Test code (`#[cfg(test)]` modules, `tests/` folders under
//! `src/`) is left out: it may reach anywhere. Loops are the strongly connected components of
//! that graph with more than one file; `docs/ARCHITECTURE.md` lists the ones that remain and the
//! architecture test holds their number and size.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's files and who imports whom (paths relative to the crate's `src/`).
#[derive(Debug, Default)]
pub struct CrateGraph {
    pub name: String,
    /// Lines of every `.rs` file under `src/`, test code included.
    pub lines: usize,
    /// file → files it imports (never itself).
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

/// A set of files of one crate that import each other in a loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportLoop {
    pub krate: String,
    pub files: Vec<String>,
}

/// Reads every crate under `crates_dir` (a folder of crates, each with `src/`).
pub fn workspace_graphs(crates_dir: &Path) -> std::io::Result<Vec<CrateGraph>> {
    let mut graphs = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(crates_dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("src").is_dir())
        .collect();
    entries.sort();
    for dir in entries {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        graphs.push(crate_graph(&name, &dir.join("src"))?);
    }
    Ok(graphs)
}

/// The import graph of one crate's `src/` folder.
pub fn crate_graph(name: &str, src: &Path) -> std::io::Result<CrateGraph> {
    let mut files = Vec::new();
    collect_rs(src, src, &mut files)?;
    // module path ("a::b", "" for the root) → file
    let mut modules: BTreeMap<String, String> = BTreeMap::new();
    for rel in &files {
        if let Some(module) = module_of(rel) {
            modules.insert(module, rel.clone());
        }
    }
    let mut graph = CrateGraph {
        name: name.to_string(),
        ..CrateGraph::default()
    };
    // First pass: what each file mentions and re-exports.
    let mut mentioned: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    // file → re-exported name → absolute path of what it names
    let mut reexports: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for rel in &files {
        let Some(module) = module_of(rel) else {
            continue;
        };
        let text = std::fs::read_to_string(src.join(rel))?;
        let code = strip_tests(&strip_comments_and_strings(&text));
        let (paths, leaves) = referenced_paths(&code);
        let mut names = BTreeMap::new();
        for leaf in leaves {
            let Some(last) = leaf.path.last() else {
                continue;
            };
            let name = leaf.alias.clone().unwrap_or_else(|| last.clone());
            if let Some(absolute) = absolute_path(&module, &leaf.path, &modules) {
                names.insert(name, absolute);
            }
        }
        reexports.insert(rel.clone(), names);
        let absolute: Vec<Vec<String>> = paths
            .iter()
            .filter_map(|p| absolute_path(&module, p, &modules))
            .collect();
        mentioned.insert(rel.clone(), absolute);
    }
    graph.lines = count_lines(src)?;
    // Second pass: a name taken through a facade's `pub use` is an import of the file that
    // defines it, not of the facade.
    for (rel, paths) in &mentioned {
        let mut targets = BTreeSet::new();
        for path in paths {
            if let Some(file) = defining_file(path, &modules, &reexports, 0)
                && file != *rel
            {
                targets.insert(file);
            }
        }
        graph.edges.insert(rel.clone(), targets);
    }
    Ok(graph)
}

/// The loops (strongly connected components of more than one file) of a crate.
pub fn loops(graph: &CrateGraph) -> Vec<ImportLoop> {
    let nodes: Vec<&String> = graph.edges.keys().collect();
    let index: BTreeMap<&String, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adjacency: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            graph.edges[*n]
                .iter()
                .filter_map(|t| index.get(t).copied())
                .collect()
        })
        .collect();
    tarjan(&adjacency)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let mut files: Vec<String> = component.iter().map(|i| nodes[*i].clone()).collect();
            files.sort();
            ImportLoop {
                krate: graph.name.clone(),
                files,
            }
        })
        .collect()
}

fn count_lines(dir: &Path) -> std::io::Result<usize> {
    let mut lines = 0;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            lines += count_lines(&path)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            lines += std::fs::read_to_string(&path)?.lines().count();
        }
    }
    Ok(lines)
}

fn collect_rs(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            // Test-only module folders (`foo/tests/…`) are test code.
            if path.file_name().is_some_and(|n| n == "tests") {
                continue;
            }
            collect_rs(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs")
            && let Ok(rel) = path.strip_prefix(root)
        {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    Ok(())
}

/// "a/b.rs" → "a::b"; "a/mod.rs" → "a"; "lib.rs"/"main.rs" → ""; `bin/` files are their own
/// roots and left out.
fn module_of(rel: &str) -> Option<String> {
    if rel.starts_with("bin/") {
        return None;
    }
    let stem = rel.strip_suffix(".rs")?;
    if stem == "lib" || stem == "main" {
        return Some(String::new());
    }
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    Some(stem.replace('/', "::"))
}

/// The file an absolute path names: the longest prefix that is a module file (`a::b::Item` lives
/// in a/b.rs, or a.rs when b is an inline module), followed through that file's re-exports.
fn defining_file(
    absolute: &[String],
    modules: &BTreeMap<String, String>,
    reexports: &BTreeMap<String, BTreeMap<String, Vec<String>>>,
    depth: usize,
) -> Option<String> {
    for len in (0..=absolute.len()).rev() {
        let key = absolute[..len].join("::");
        let Some(file) = modules.get(&key) else {
            continue;
        };
        if depth < 8
            && let Some(name) = absolute.get(len)
            && let Some(target) = reexports.get(file).and_then(|names| names.get(name))
            && target.as_slice() != &absolute[..=len]
        {
            let mut followed = target.clone();
            followed.extend(absolute[len + 1..].iter().cloned());
            return defining_file(&followed, modules, reexports, depth + 1);
        }
        return Some(file.clone());
    }
    None
}

/// Resolves a path as written in `module` to segments from the crate root.
fn absolute_path(
    module: &str,
    path: &[String],
    modules: &BTreeMap<String, String>,
) -> Option<Vec<String>> {
    let mut current: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_string).collect()
    };
    let first = path.first()?;
    let mut rest = &path[1..];
    match first.as_str() {
        "crate" => current.clear(),
        "self" => {}
        "super" => {
            current.pop()?;
            while rest.first().is_some_and(|s| s == "super") {
                current.pop()?;
                rest = &rest[1..];
            }
        }
        child => {
            // A bare path starting with a child module of this file (`board::Board` in lib.rs).
            let mut candidate = current.clone();
            candidate.push(child.to_string());
            if !modules.contains_key(&candidate.join("::")) {
                return None;
            }
            current = candidate;
        }
    }
    current.extend(rest.iter().cloned());
    Some(current)
}

/// The paths a file mentions (`use` trees expanded, and inline `a::b::c` chains), and the
/// names it re-exports (`pub use`, any visibility) with their paths.
fn referenced_paths(code: &str) -> (Vec<Vec<String>>, Vec<UseLeaf>) {
    let tokens = tokenize(code);
    let mut paths = Vec::new();
    let mut reexports = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "use" {
            let public = i > 0
                && (tokens[i - 1] == "pub"
                    || (tokens[i - 1] == ")"
                        && tokens[..i].iter().rev().take(6).any(|t| t == "pub")));
            let mut j = i + 1;
            let mut prefix = Vec::new();
            let mut leaves = Vec::new();
            expand_use(&tokens, &mut j, &mut prefix, &mut leaves);
            for leaf in leaves {
                paths.push(leaf.path.clone());
                if public && leaf.alias.as_deref() != Some("*") {
                    reexports.push(leaf);
                }
            }
            i = j;
            continue;
        }
        if is_ident(&tokens[i])
            && tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || tokens[i - 1] != "::")
        {
            let mut path = vec![tokens[i].clone()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|t| t == "::")
                && tokens.get(j + 1).is_some_and(|t| is_ident(t))
            {
                path.push(tokens[j + 1].clone());
                j += 2;
            }
            paths.push(path);
            i = j;
            continue;
        }
        i += 1;
    }
    (paths, reexports)
}

/// One name a `use` brings in: its path and the name it takes (the last segment or the `as`).
struct UseLeaf {
    path: Vec<String>,
    alias: Option<String>,
}

fn expand_use(tokens: &[String], j: &mut usize, prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
    let depth = prefix.len();
    let mut alias = None;
    loop {
        let Some(token) = tokens.get(*j) else {
            return;
        };
        match token.as_str() {
            "{" => {
                *j += 1;
                loop {
                    expand_use(tokens, j, prefix, out);
                    match tokens.get(*j).map(String::as_str) {
                        Some(",") => {
                            *j += 1;
                            if tokens.get(*j).is_some_and(|t| t == "}") {
                                *j += 1;
                                break;
                            }
                        }
                        Some("}") => {
                            *j += 1;
                            break;
                        }
                        _ => return,
                    }
                }
                prefix.truncate(depth);
                return;
            }
            "::" => *j += 1,
            "as" => {
                alias = tokens.get(*j + 1).cloned();
                *j += 2;
            }
            ";" | "," | "}" => {
                if !prefix.is_empty() {
                    out.push(UseLeaf {
                        path: prefix.clone(),
                        alias: alias.take(),
                    });
                }
                if *j < tokens.len() && tokens[*j] == ";" {
                    *j += 1;
                }
                prefix.truncate(depth);
                return;
            }
            "*" => {
                alias = Some("*".to_string());
                *j += 1;
            }
            t if is_ident(t) => {
                prefix.push(t.to_string());
                *j += 1;
            }
            _ => {
                prefix.truncate(depth);
                return;
            }
        }
    }
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

fn tokenize(code: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".to_string());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            tokens.push(c.to_string());
            i += 1;
        }
    }
    tokens
}

/// Blanks comments, string and char literals (keeping braces of code balanced).
fn strip_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !prev_is_ident(&chars, i)
        {
            // raw string r"…" / r#"…"#
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // char literal ('a', '\n', '\u{..}') or a lifetime ('a)
            if next == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev_is_ident(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// Removes `#[cfg(test)]` items (a `mod tests { … }` block or a single item up to its `;`).
fn strip_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let brace = after.find('{');
        let semi = after.find(';');
        match (brace, semi) {
            (Some(b), Some(s)) if s < b => rest = &after[s + 1..],
            (Some(b), _) => {
                let mut depth = 0usize;
                let mut end = after.len();
                for (k, ch) in after[b..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &after[end..];
            }
            (None, Some(s)) => rest = &after[s + 1..],
            (None, None) => rest = "",
        }
    }
    out.push_str(rest);
    out
}

fn tarjan(adjacency: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        adjacency: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        components: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.adjacency[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.components.push(component);
        }
    }
    let n = adjacency.len();
    let mut s = State {
        adjacency,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.components
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(files: &[(&str, &str)]) -> CrateGraph {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        crate_graph("k", dir.path()).unwrap()
    }

    #[test]
    fn use_trees_super_child_and_inline_paths_are_edges() {
        let g = graph(&[
            ("lib.rs", "mod a; mod b; pub use a::A;"),
            (
                "a.rs",
                "use crate::{b::{B, self}, c::C as D};\nfn f() { super::b::g(); }",
            ),
            ("b.rs", "pub fn g() { let _ = crate::c::inner::thing(); }"),
            ("c/mod.rs", "mod inner; use self::inner::X;"),
            (
                "c/inner.rs",
                "// use crate::a::A;\nconst S: &str = \"crate::a::A\";",
            ),
        ]);
        assert_eq!(g.edges["lib.rs"], BTreeSet::from(["a.rs".to_string()]));
        assert_eq!(
            g.edges["a.rs"],
            BTreeSet::from(["b.rs".to_string(), "c/mod.rs".to_string()])
        );
        assert_eq!(g.edges["b.rs"], BTreeSet::from(["c/inner.rs".to_string()]));
        assert_eq!(
            g.edges["c/mod.rs"],
            BTreeSet::from(["c/inner.rs".to_string()])
        );
        assert!(
            g.edges["c/inner.rs"].is_empty(),
            "comments and strings are not imports"
        );
        assert!(loops(&g).is_empty());
    }

    #[test]
    fn a_loop_is_found_and_test_code_is_not_counted() {
        let g = graph(&[
            ("lib.rs", "mod a; mod b; mod c;"),
            ("a.rs", "use crate::b::B;"),
            ("b.rs", "use crate::c::C;"),
            (
                "c.rs",
                "use crate::a::A;\n#[cfg(test)]\nmod tests { use crate::lib; }",
            ),
            ("d.rs", "#[cfg(test)]\nuse crate::a::A;\n"),
        ]);
        let found = loops(&g);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].files, vec!["a.rs", "b.rs", "c.rs"]);
        assert!(g.edges["d.rs"].is_empty());
    }
}
