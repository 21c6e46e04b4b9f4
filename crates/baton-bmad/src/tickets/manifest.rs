//! `tickets.toml`, read strictly with each table's line: an epic's holds one `[[entry]]` per
//! planned ticket (table order is the build order), an initiative's one `[[epic]]` per epic.
//! Each table has a stable integer `id` and may have `after`, its real prerequisites: a
//! sibling's id (`3`), `"<epic id>.<entry id>"` for an entry of another epic, `"epic-<slug>"`
//! for a whole epic. Other keys (title, type, slug, notes, references, …) are BMAD's and kept
//! as they are; baton reads `title` to show it.

use crate::error::{BmadError, Result};
use toml::Spanned;

pub const FILE_NAME: &str = "tickets.toml";
/// Most tables in one `tickets.toml`.
pub const MAX_TABLES: usize = 10_000;

/// One prerequisite of an `after` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum After {
    /// An entry of the same epic, by id.
    Sibling(u64),
    /// `"<epic id>.<entry id>"`.
    Entry { epic: u64, entry: u64 },
    /// `"epic-<slug>"`: every entry of that epic.
    Epic(String),
}

impl std::fmt::Display for After {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            After::Sibling(id) => write!(f, "{id}"),
            After::Entry { epic, entry } => write!(f, "{epic}.{entry}"),
            After::Epic(name) => f.write_str(name),
        }
    }
}

/// One `[[entry]]` or `[[epic]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub id: u64,
    pub after: Vec<After>,
    pub title: Option<String>,
    /// `[[epic]]` only: the epic's folder as the table names it (`slug`, `folder` or `name`).
    pub folder: Option<String>,
    /// 1-based line of the table's header.
    pub line: usize,
}

/// What a `tickets.toml` holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub entries: Vec<Table>,
    pub epics: Vec<Table>,
}

/// A TOML value as written in a message.
fn value_text(v: &toml::Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "?".into())
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// The line of the `[[kind]]` header that opens the table starting at or before `at`.
fn header_line(text: &str, kind: &str, at: usize) -> usize {
    let header = format!("[[{kind}]]");
    // The table's span may start at its header or at its first key.
    let mut end = (at + header.len()).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    before
        .rfind(&header)
        .map_or_else(|| line_of(text, at), |i| line_of(text, i))
}

fn invalid(shown: &str, line: usize, problem: impl std::fmt::Display) -> BmadError {
    BmadError::usage(
        "TICKETS_TOML_INVALID",
        format!("{shown} (line {line}): {problem}"),
    )
    .hint("fix tickets.toml as BMAD's ticketing skill writes it (one [[entry]] per ticket with an integer id), then run the command again")
}

fn parse_after(shown: &str, line: usize, value: &toml::Value) -> Result<Vec<After>> {
    let items: Vec<&toml::Value> = match value {
        toml::Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let after = match item {
            toml::Value::Integer(i) if *i > 0 => After::Sibling(*i as u64),
            toml::Value::String(s) => parse_after_text(s).ok_or_else(|| {
                invalid(
                    shown,
                    line,
                    format!("field after: {s:?} is not an entry id (3), \"<epic id>.<entry id>\" (\"2.3\") or \"epic-<slug>\""),
                )
            })?,
            other => {
                return Err(invalid(
                    shown,
                    line,
                    format!("field after: {} is not an entry id, \"<epic id>.<entry id>\" or \"epic-<slug>\"", value_text(other)),
                ));
            }
        };
        out.push(after);
    }
    Ok(out)
}

fn parse_after_text(s: &str) -> Option<After> {
    let s = s.trim();
    if let Ok(id) = s.parse::<u64>() {
        return (id > 0).then_some(After::Sibling(id));
    }
    if let Some((e, n)) = s.split_once('.') {
        let (e, n) = (e.parse::<u64>().ok()?, n.parse::<u64>().ok()?);
        return Some(After::Entry { epic: e, entry: n });
    }
    let slug = s.strip_prefix("epic-")?;
    let ok = !slug.is_empty()
        && slug
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    ok.then(|| After::Epic(s.to_string()))
}

fn table(shown: &str, kind: &str, text: &str, raw: &Spanned<toml::Table>) -> Result<Table> {
    let line = header_line(text, kind, raw.span().start);
    let t = raw.get_ref();
    let id = match t.get("id") {
        Some(toml::Value::Integer(i)) if *i > 0 => *i as u64,
        Some(other) => {
            return Err(invalid(
                shown,
                line,
                format!("field id: {} is not a positive integer", value_text(other)),
            ));
        }
        None => return Err(invalid(shown, line, format!("[[{kind}]] has no id"))),
    };
    let after = match t.get("after") {
        Some(v) => parse_after(shown, line, v)?,
        None => Vec::new(),
    };
    let title = t
        .get("title")
        .and_then(toml::Value::as_str)
        .map(str::to_owned);
    let folder = ["slug", "folder", "name"]
        .iter()
        .find_map(|k| t.get(*k).and_then(toml::Value::as_str))
        .map(str::to_owned);
    Ok(Table {
        id,
        after,
        title,
        folder,
        line,
    })
}

/// Reads a `tickets.toml` (`shown`: its project-relative path, for messages).
pub fn parse(shown: &str, text: &str) -> Result<Manifest> {
    #[derive(serde::Deserialize)]
    struct Raw {
        #[serde(default)]
        entry: Vec<Spanned<toml::Table>>,
        #[serde(default)]
        epic: Vec<Spanned<toml::Table>>,
    }
    let raw: Raw = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        invalid(shown, line, format!("is not valid TOML: {}", e.message()))
    })?;
    if raw.entry.len() + raw.epic.len() > MAX_TABLES {
        return Err(invalid(
            shown,
            1,
            format!("holds more than {MAX_TABLES} tables"),
        ));
    }
    let mut out = Manifest::default();
    for (kind, list, into) in [
        ("entry", &raw.entry, &mut out.entries),
        ("epic", &raw.epic, &mut out.epics),
    ] {
        for r in list {
            let t = table(shown, kind, text, r)?;
            if let Some(first) = into.iter().find(|o: &&Table| o.id == t.id) {
                return Err(BmadError::usage(
                    "TICKET_ID_DUPLICATE",
                    format!(
                        "{shown} (line {}): id {} is already the id of the [[{kind}]] at line {}",
                        t.line, t.id, first.line
                    ),
                )
                .hint("ids are assigned once and never reused: give the table its own id"));
            }
            into.push(t);
        }
    }
    Ok(out)
}
