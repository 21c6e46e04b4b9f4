//! A command or skill `.md`: its frontmatter (maestro's small YAML subset), its body with the
//! frontmatter stripped, and the files its `<required_reading>` and `<deferred_reading>` blocks
//! name.
//!
//! As in maestro, the first block of each kind counts (a later `<required_reading>` block is
//! body text; a missing file it names is only a warning). Unlike maestro, a block inside a
//! fenced code sample is ignored, and each reference keeps its own line and position, so the
//! prompt can inline exactly the file each reference names.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Command files and required files larger than this are refused (a model can write anything,
/// including a reference to a huge or endless file).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FmValue {
    Str(String),
    List(Vec<String>),
}

#[derive(Debug, Clone, Default)]
pub struct Frontmatter(pub Vec<(String, FmValue)>);

impl Frontmatter {
    pub fn get(&self, key: &str) -> Option<&FmValue> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// A scalar as maestro's `(x ?? '').toString()` shows it (a list joins with commas).
    pub fn text(&self, key: &str) -> String {
        match self.get(key) {
            Some(FmValue::Str(s)) => s.clone(),
            Some(FmValue::List(items)) => items.join(","),
            None => String::new(),
        }
    }
}

/// One path named in a reading block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// As written (`@~/.maestro/workflows/plan.md`, `plan.json`).
    pub raw: String,
    /// Expanded and normalized.
    pub path: PathBuf,
}

/// A reading block of the body: byte range of the whole `<tag>…</tag>` and of its inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub start: usize,
    pub end: usize,
    pub inner_start: usize,
    pub inner_end: usize,
}

#[derive(Debug, Clone)]
pub struct Manifest {
    pub path: PathBuf,
    pub frontmatter: Frontmatter,
    pub body: String,
    /// The references of the first `<required_reading>` block: what is read and inlined.
    pub required: Vec<Reference>,
    /// The references of any later `<required_reading>` block: not read (as in maestro).
    pub later_required: Vec<Reference>,
    /// The references of the first `<deferred_reading>` block.
    pub deferred: Vec<Reference>,
}

fn missing(refs: &[Reference]) -> Vec<String> {
    refs.iter()
        .filter(|r| !r.path.exists())
        .map(|r| r.path.display().to_string())
        .collect()
}

impl Manifest {
    /// Reads and parses a command file. `home` expands `~`.
    pub fn load(path: &Path, home: Option<&Path>) -> Result<Manifest, String> {
        let text = read_text(path)?;
        Ok(Manifest::parse(path, &text, home))
    }

    pub fn parse(path: &Path, text: &str, home: Option<&Path>) -> Manifest {
        let (frontmatter, body) = split_frontmatter(text);
        let base = path.parent().unwrap_or(Path::new("/"));
        // maestro reads the first block of each kind; later blocks are text of the body.
        let refs = |blocks: &[Block]| -> Vec<Reference> {
            blocks
                .iter()
                .flat_map(|b| body[b.inner_start..b.inner_end].split('\n'))
                .flat_map(line_refs)
                .map(|raw| Reference {
                    path: expand(&raw, base, home),
                    raw,
                })
                .collect()
        };
        let required = blocks(body, "required_reading");
        let deferred = blocks(body, "deferred_reading");
        Manifest {
            path: path.to_path_buf(),
            frontmatter: frontmatter.map(parse_frontmatter).unwrap_or_default(),
            body: body.to_string(),
            required: refs(&required[..required.len().min(1)]),
            later_required: refs(required.get(1..).unwrap_or_default()),
            deferred: refs(&deferred[..deferred.len().min(1)]),
        }
    }

    /// Required paths that do not exist (maestro's E007 test: the first block only).
    pub fn missing_required(&self) -> Vec<String> {
        missing(&self.required)
    }

    /// Paths of later `<required_reading>` blocks that do not exist: maestro never reads those
    /// blocks, so a missing file there is a warning (W012), never E007.
    pub fn missing_later(&self) -> Vec<String> {
        missing(&self.later_required)
    }

    pub fn name(&self) -> String {
        self.frontmatter.text("name").trim().to_string()
    }
}

/// Reads a file as text (lossy UTF-8, as Node's `readFileSync(p, 'utf-8')`), refusing
/// anything but a regular file within [`MAX_FILE_BYTES`].
pub fn read_text(path: &Path) -> Result<String, String> {
    let file = baton_autopilot::untrusted::open_nonblocking(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{} is {} bytes, over the {MAX_FILE_BYTES}-byte limit",
            path.display(),
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// maestro's `^---\r?\n([\s\S]*?)\r?\n---\r?\n?`: the frontmatter text and the body after it.
pub fn split_frontmatter(text: &str) -> (Option<&str>, &str) {
    let open = if text.starts_with("---\n") {
        4
    } else if text.starts_with("---\r\n") {
        5
    } else {
        return (None, text);
    };
    let Some(rel) = text[open..].find("\n---") else {
        return (None, text);
    };
    let q = open + rel;
    let fm_end = if q > open && text.as_bytes()[q - 1] == b'\r' {
        q - 1
    } else {
        q
    };
    let mut rest = q + 4;
    if text[rest..].starts_with('\r') {
        rest += 1;
    }
    if text[rest..].starts_with('\n') {
        rest += 1;
    }
    (Some(&text[open..fm_end]), &text[rest..])
}

/// maestro's frontmatter subset: `key: value`, `key: [a, b]`, `key:` (or `|`/`>`) followed by
/// `  - item` lines; surrounding quotes stripped.
pub fn parse_frontmatter(raw: &str) -> Frontmatter {
    let mut out: Vec<(String, FmValue)> = Vec::new();
    let mut list_key: Option<usize> = None;
    for line in raw.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
        if line.trim().is_empty() {
            list_key = None;
            continue;
        }
        if let Some(k) = list_key
            && let Some(item) = list_item(line)
        {
            if let FmValue::List(items) = &mut out[k].1 {
                items.push(unquote(item.trim()).to_string());
            }
            continue;
        }
        let Some((key, val)) = key_value(line) else {
            list_key = None;
            continue;
        };
        if val.is_empty() || val == "|" || val == ">" {
            out.push((key.to_string(), FmValue::List(Vec::new())));
            list_key = Some(out.len() - 1);
            continue;
        }
        list_key = None;
        if let Some(inner) = val.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            let items = inner
                .split(',')
                .map(|s| unquote(s.trim()).to_string())
                .filter(|s| !s.is_empty())
                .collect();
            out.push((key.to_string(), FmValue::List(items)));
            continue;
        }
        out.push((key.to_string(), FmValue::Str(unquote(val).to_string())));
    }
    Frontmatter(out)
}

/// `^\s+-\s+(.+)$`
fn list_item(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    if trimmed.len() == line.len() {
        return None;
    }
    let rest = trimmed.strip_prefix('-')?;
    let item = rest.trim_start();
    (item.len() < rest.len() && !item.is_empty()).then_some(item)
}

/// `^([A-Za-z0-9_-]+):\s*(.*)$`
fn key_value(line: &str) -> Option<(&str, &str)> {
    let colon = line.find(':')?;
    let key = &line[..colon];
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    ok.then(|| (key, line[colon + 1..].trim_start()))
}

/// `replace(/^["']|["']$/g, '')`: one quote off each end, independently.
fn unquote(s: &str) -> &str {
    let s = s.strip_prefix(['"', '\'']).unwrap_or(s);
    s.strip_suffix(['"', '\'']).unwrap_or(s)
}

/// Every `<tag>…</tag>` block of a body (tag matched case-insensitively), skipping tags inside
/// fenced code and tags quoted in inline code.
pub fn blocks(body: &str, tag: &str) -> Vec<Block> {
    let lower = body.to_ascii_lowercase();
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let fences = fenced_ranges(body);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(rel) = lower[from..].find(&open) {
        let start = from + rel;
        let quoted = start > 0 && body.as_bytes()[start - 1] == b'`';
        if quoted || fences.iter().any(|r| r.contains(&start)) {
            from = start + open.len();
            continue;
        }
        let inner_start = start + open.len();
        let Some(rel_close) = lower[inner_start..].find(&close) else {
            break;
        };
        let inner_end = inner_start + rel_close;
        let end = inner_end + close.len();
        out.push(Block {
            start,
            end,
            inner_start,
            inner_end,
        });
        from = end;
    }
    out
}

/// Byte ranges of fenced code blocks (``` or ~~~, up to three spaces of indent).
fn fenced_ranges(body: &str) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut open: Option<(usize, &str)> = None;
    let mut pos = 0;
    for line in body.split_inclusive('\n') {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let t = line.trim_start_matches(' ');
        let fence = if indent <= 3 {
            ["```", "~~~"].into_iter().find(|f| t.starts_with(f))
        } else {
            None
        };
        match (open, fence) {
            (None, Some(f)) => open = Some((pos, f)),
            (Some((start, f)), Some(g)) if f == g => {
                ranges.push(start..pos + line.len());
                open = None;
            }
            _ => {}
        }
        pos += line.len();
    }
    if let Some((start, _)) = open {
        ranges.push(start..body.len());
    }
    ranges
}

/// The references of one block line, in order: every `@path` token; otherwise a
/// `- [label](path)` link; otherwise a `- path` bullet.
pub fn line_refs(line: &str) -> Vec<String> {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Vec::new();
    }
    let ats = at_tokens(trimmed);
    if !ats.is_empty() {
        return ats;
    }
    if let Some(rest) = bullet(trimmed) {
        if let Some(link) = md_link_target(rest) {
            return vec![link.to_string()];
        }
        if let Some(word) = rest.split_whitespace().next() {
            return vec![word.to_string()];
        }
    }
    Vec::new()
}

/// `@[^\s,()<>]+`, every match.
fn at_tokens(s: &str) -> Vec<String> {
    let stop = |c: char| c.is_whitespace() || matches!(c, ',' | '(' | ')' | '<' | '>');
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(at) = rest.find('@') {
        let after = &rest[at + 1..];
        let len = after.find(stop).unwrap_or(after.len());
        if len > 0 {
            out.push(format!("@{}", &after[..len]));
        }
        rest = &after[len..];
    }
    out
}

/// `^-\s+` → the rest.
fn bullet(s: &str) -> Option<&str> {
    let rest = s.strip_prefix('-')?;
    let t = rest.trim_start();
    (t.len() < rest.len()).then_some(t)
}

/// `\[[^\]]*\]\(([^)]+)\)` at the start of `s`.
fn md_link_target(s: &str) -> Option<&str> {
    let rest = s.strip_prefix('[')?;
    let close = rest.find(']')?;
    let after = rest[close + 1..].strip_prefix('(')?;
    let end = after.find(')')?;
    (end > 0).then(|| &after[..end])
}

/// maestro's `expandPath`: strip `@`; `~` is the home directory; absolute paths stay; a
/// `.claude/…` path resolves against the parent of the deepest `.claude` folder of the file's
/// directory; anything else against the file's directory. Normalized like Node's `resolve`.
pub fn expand(raw: &str, base: &Path, home: Option<&Path>) -> PathBuf {
    let p = raw.trim();
    let p = p.strip_prefix('@').unwrap_or(p);
    let root = Path::new("/");
    let home = home.unwrap_or(root);
    if p == "~" {
        return normalize(home);
    }
    if let Some(rest) = p.strip_prefix("~/").or_else(|| p.strip_prefix("~\\")) {
        return normalize(&home.join(rest));
    }
    let path = Path::new(p);
    if path.is_absolute() {
        return normalize(path);
    }
    if (p.starts_with(".claude/") || p.starts_with(".claude\\"))
        && let Some(root) = claude_root(base)
    {
        return normalize(&root.join(p));
    }
    normalize(&base.join(p))
}

/// The parent of the deepest `.claude` component of `dir`.
fn claude_root(dir: &Path) -> Option<PathBuf> {
    let comps: Vec<Component> = dir.components().collect();
    let last = comps.iter().rposition(|c| c.as_os_str() == ".claude")?;
    Some(comps[..last].iter().collect())
}

/// Lexical normalization (`.` dropped, `..` pops), as Node's `path.resolve` does.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(c);
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// maestro's `normalizeStoredPath`: `~/` in a stored `command_path` is the home directory.
pub fn stored_path(p: &str, home: Option<&Path>) -> PathBuf {
    let home = home.unwrap_or(Path::new("/"));
    if p == "~" {
        return home.to_path_buf();
    }
    match p.strip_prefix("~/").or_else(|| p.strip_prefix("~\\")) {
        Some(rest) => home.join(rest),
        None => PathBuf::from(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_is_split_like_maestro() {
        let (fm, body) = split_frontmatter("---\nname: x\n---\nbody\n");
        assert_eq!(fm, Some("name: x"));
        assert_eq!(body, "body\n");
        let (fm, body) = split_frontmatter("---\r\nname: x\r\n---\r\nbody");
        assert_eq!(fm, Some("name: x"));
        assert_eq!(body, "body");
        assert_eq!(split_frontmatter("no frontmatter").0, None);
        assert_eq!(split_frontmatter("---\nunclosed\n").0, None);
    }

    #[test]
    fn frontmatter_subset() {
        let fm = parse_frontmatter(
            "name: \"maestro-plan\"\ndescription: Plan: a phase\nallowed-tools:\n  - Read\n  - 'Write'\ntags: [a, \"b\", ]\nargument-hint: \"<phase> [--gaps]\"",
        );
        assert_eq!(fm.text("name"), "maestro-plan");
        assert_eq!(fm.text("description"), "Plan: a phase");
        assert_eq!(
            fm.get("allowed-tools"),
            Some(&FmValue::List(vec!["Read".into(), "Write".into()]))
        );
        assert_eq!(
            fm.get("tags"),
            Some(&FmValue::List(vec!["a".into(), "b".into()]))
        );
        assert_eq!(fm.text("argument-hint"), "<phase> [--gaps]");
    }

    #[test]
    fn references_per_line() {
        assert_eq!(
            line_refs("  @a.md, then @b.md (and @c)"),
            ["@a.md", "@b.md", "@c"]
        );
        assert_eq!(
            line_refs("- [plan.json](~/t/plan.json) template"),
            ["~/t/plan.json"]
        );
        assert_eq!(line_refs("- notes.md optional"), ["notes.md"]);
        assert!(line_refs("just prose").is_empty());
        assert!(line_refs("-no-space").is_empty());
    }

    #[test]
    fn every_block_outside_code_fences() {
        let body = "a\n<required_reading>\n@one\n</required_reading>\n```\n<required_reading>\n@fenced\n</required_reading>\n```\nSee `<required_reading>` above.\n<REQUIRED_READING>@two</Required_Reading>\n";
        let found: Vec<&str> = blocks(body, "required_reading")
            .iter()
            .map(|b| &body[b.inner_start..b.inner_end])
            .collect();
        assert_eq!(found, ["\n@one\n", "@two"]);
    }

    #[test]
    fn paths_expand_like_maestro() {
        let home = Path::new("/home/u");
        let base = Path::new("/p/.claude/commands");
        assert_eq!(
            expand("@~/.maestro/w.md", base, Some(home)),
            Path::new("/home/u/.maestro/w.md")
        );
        assert_eq!(
            expand("@/abs/x.md", base, Some(home)),
            Path::new("/abs/x.md")
        );
        assert_eq!(
            expand("@.claude/skills/s/a.md", base, Some(home)),
            Path::new("/p/.claude/skills/s/a.md")
        );
        assert_eq!(
            expand("../t/x.md", base, Some(home)),
            Path::new("/p/.claude/t/x.md")
        );
        assert_eq!(
            expand("./x.md", base, Some(home)),
            Path::new("/p/.claude/commands/x.md")
        );
    }
}
