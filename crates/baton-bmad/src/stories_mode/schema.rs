//! `stories.yaml`, the story list of a BMAD 6.12 spec folder (written by `bmad-spec`'s Story
//! Breakdown, next to `SPEC.md`), read strictly:
//!
//! - the file is a YAML list, one mapping per story, run in list order;
//! - `id` (required) is a quoted string of letters, digits and dashes, unique, and no id is
//!   another id plus a dash-suffix (`"3"` and `"3-1"` cannot both exist: the story files are
//!   matched as `stories/{id}-*.md`);
//! - `title` (one line) and `description` are required strings; `spec_checkpoint` and
//!   `done_checkpoint` are optional booleans, `invoke_dev_with` an optional string;
//! - there is no `status` field: a story's status is the frontmatter `status:` of its file;
//! - nothing else is accepted, and the file, the list and every text are bounded (a model may
//!   have written the file).
//!
//! Every refusal names the file and the line.

use crate::error::{BmadError, Result};
use serde_json::Value;
use serde_saphyr::Spanned;

pub const FILE_NAME: &str = "stories.yaml";
/// Most stories one file may list.
pub const MAX_STORIES: usize = 500;
/// Longest id, in characters.
pub const MAX_ID: usize = 64;
/// Longest title, in characters.
pub const MAX_TITLE: usize = 300;
/// Longest description or `invoke_dev_with`, in characters.
pub const MAX_TEXT: usize = 16_000;

const CODE: &str = "STORIES_YAML_INVALID";
const FIELDS: [&str; 6] = [
    "id",
    "title",
    "description",
    "spec_checkpoint",
    "done_checkpoint",
    "invoke_dev_with",
];

/// One story of `stories.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoryEntry {
    pub id: String,
    pub title: String,
    pub description: String,
    /// A person reviews the story's spec between planning and implementation.
    pub spec_checkpoint: bool,
    /// The walk pauses after this story is done, before anything further runs.
    pub done_checkpoint: bool,
    /// Text given verbatim to the dev phase (empty: none).
    pub invoke_dev_with: String,
    /// 1-based line of the entry's `- `.
    pub line: usize,
}

fn invalid(shown: &str, line: Option<usize>, problem: impl std::fmt::Display) -> BmadError {
    let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
    BmadError::usage(CODE, format!("{shown}{at}: {problem}")).hint(
        "stories.yaml is a YAML list of stories, each with a quoted `id` (letters, digits, dashes), `title` and `description`, optionally `spec_checkpoint`, `done_checkpoint` and `invoke_dev_with`; a story's status lives in its file `stories/{id}-*.md`, never here. Fix the file (bmad-spec's Story Breakdown writes it), then run the command again",
    )
}

fn line_of(loc: &serde_saphyr::Location) -> Option<usize> {
    usize::try_from(loc.line()).ok().filter(|l| *l > 0)
}

/// Parses and checks the text of `stories.yaml`; `shown` names it in messages.
pub fn parse(shown: &str, text: &str) -> Result<Vec<StoryEntry>> {
    let options = serde_saphyr::options! { with_snippet: false };
    // First as plain YAML: syntax errors and the overall shape, with their line.
    let plain: Value = serde_saphyr::from_str_with_options(text, options.clone())
        .map_err(|e| yaml_error(shown, &e))?;
    let items = match &plain {
        Value::Array(items) => items,
        Value::Null => return Err(invalid(shown, None, "is empty: it lists no story")),
        _ => {
            return Err(invalid(
                shown,
                Some(1),
                "must be a YAML list of stories (`- id: \"1\"` …), not a mapping or a scalar",
            ));
        }
    };
    if items.is_empty() {
        return Err(invalid(
            shown,
            Some(1),
            "the list is empty: it lists no story",
        ));
    }
    if items.len() > MAX_STORIES {
        return Err(invalid(
            shown,
            None,
            format!(
                "lists {} stories; at most {MAX_STORIES} are read",
                items.len()
            ),
        ));
    }
    // Then with locations: every entry and every field value knows its line.
    let entries: Vec<Spanned<Value>> = serde_saphyr::from_str_with_options(text, options.clone())
        .map_err(|e| yaml_error(shown, &e))?;
    for (i, entry) in entries.iter().enumerate() {
        if !entry.value.is_object() {
            return Err(invalid(
                shown,
                line_of(&entry.referenced),
                format!(
                    "story {} is not a mapping: each story is `- id: \"…\"` followed by its fields",
                    i + 1
                ),
            ));
        }
    }
    let fields: Vec<Fields> =
        serde_saphyr::from_str_with_options(text, options).map_err(|e| yaml_error(shown, &e))?;
    let mut out: Vec<StoryEntry> = Vec::with_capacity(entries.len());
    for (i, (entry, fields)) in entries.iter().zip(&fields).enumerate() {
        out.push(entry_fields(
            shown,
            text,
            i + 1,
            line_of(&entry.referenced),
            fields,
        )?);
    }
    check_ids(shown, &out)?;
    Ok(out)
}

/// The field values of one entry, each with where it starts.
type Fields = std::collections::BTreeMap<String, Spanned<Value>>;

/// Story `n` (1-based) at `line`, from its fields (quoting is only visible in the source text).
fn entry_fields(
    shown: &str,
    text: &str,
    n: usize,
    line: Option<usize>,
    fields: &Fields,
) -> Result<StoryEntry> {
    let at = |key: &str| {
        fields
            .get(key)
            .and_then(|v| line_of(&v.referenced))
            .or(line)
    };
    if let Some(loc) = fields.get("status") {
        return Err(invalid(
            shown,
            line_of(&loc.referenced).or(line),
            format!(
                "story {n} has a `status` field; stories.yaml never holds a status (it is the frontmatter `status:` of the story's file stories/{{id}}-*.md): remove the field"
            ),
        ));
    }
    if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(invalid(
            shown,
            at(unknown),
            format!(
                "story {n} has an unknown field `{unknown}`; the fields are {}",
                FIELDS.join(", ")
            ),
        ));
    }
    // The id: present, a quoted string, of the allowed characters.
    let Some(id_value) = fields.get("id") else {
        return Err(invalid(
            shown,
            line,
            format!("story {n} has no `id` (required)"),
        ));
    };
    let id_line = line_of(&id_value.referenced).or(line);
    let id = match &id_value.value {
        Value::String(s) => s.clone(),
        other => {
            return Err(invalid(
                shown,
                id_line,
                format!(
                    "the id of story {n} is {} `{}`, not a string: write it quoted, e.g. id: \"{}\"",
                    kind(other),
                    other,
                    other.to_string().trim_matches('"')
                ),
            ));
        }
    };
    if !quoted_at(text, &id_value.referenced) {
        return Err(invalid(
            shown,
            id_line,
            format!("the id of story {n} ({id}) is not quoted: write id: \"{id}\""),
        ));
    }
    if id.is_empty() {
        return Err(invalid(
            shown,
            id_line,
            format!("the id of story {n} is empty"),
        ));
    }
    if id.chars().count() > MAX_ID {
        return Err(invalid(
            shown,
            id_line,
            format!("the id of story {n} is longer than {MAX_ID} characters"),
        ));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
    {
        return Err(invalid(
            shown,
            id_line,
            format!(
                "the id {id:?} of story {n} contains {c:?}: ids hold only letters, digits and dashes (they begin the story's file name)"
            ),
        ));
    }
    let title = required_text(shown, fields, "title", n, line, MAX_TITLE)?;
    if title.contains(['\n', '\r']) {
        return Err(invalid(
            shown,
            at("title"),
            format!("the title of story {n} ({id}) must be one line"),
        ));
    }
    let description = required_text(shown, fields, "description", n, line, MAX_TEXT)?;
    let spec_checkpoint = optional_bool(shown, fields, "spec_checkpoint", n, line)?;
    let done_checkpoint = optional_bool(shown, fields, "done_checkpoint", n, line)?;
    let invoke_dev_with = match fields.get("invoke_dev_with") {
        None => String::new(),
        Some(v) => text_value(shown, v, "invoke_dev_with", n, line, MAX_TEXT)?,
    };
    Ok(StoryEntry {
        id,
        title,
        description,
        spec_checkpoint,
        done_checkpoint,
        invoke_dev_with,
        line: line.unwrap_or(0),
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "empty",
        Value::Bool(_) => "the boolean",
        Value::Number(_) => "the number",
        Value::String(_) => "the string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Whether the scalar at `loc` is written in quotes in `text`.
fn quoted_at(text: &str, loc: &serde_saphyr::Location) -> bool {
    let (Ok(line), Ok(column)) = (usize::try_from(loc.line()), usize::try_from(loc.column()))
    else {
        return false;
    };
    let Some(l) = text.lines().nth(line.saturating_sub(1)) else {
        return false;
    };
    matches!(l.chars().nth(column.saturating_sub(1)), Some('"' | '\''))
}

fn required_text(
    shown: &str,
    fields: &Fields,
    name: &str,
    n: usize,
    line: Option<usize>,
    max: usize,
) -> Result<String> {
    let Some(v) = fields.get(name) else {
        return Err(invalid(
            shown,
            line,
            format!("story {n} has no `{name}` (required)"),
        ));
    };
    let text = text_value(shown, v, name, n, line, max)?;
    if text.trim().is_empty() {
        return Err(invalid(
            shown,
            line_of(&v.referenced).or(line),
            format!("the {name} of story {n} is empty (required)"),
        ));
    }
    Ok(text)
}

fn text_value(
    shown: &str,
    v: &Spanned<Value>,
    name: &str,
    n: usize,
    line: Option<usize>,
    max: usize,
) -> Result<String> {
    let at = line_of(&v.referenced).or(line);
    let Value::String(s) = &v.value else {
        return Err(invalid(
            shown,
            at,
            format!(
                "the {name} of story {n} must be a string, not {}",
                kind(&v.value)
            ),
        ));
    };
    if s.chars().count() > max {
        return Err(invalid(
            shown,
            at,
            format!("the {name} of story {n} is longer than {max} characters"),
        ));
    }
    Ok(s.clone())
}

fn optional_bool(
    shown: &str,
    fields: &Fields,
    name: &str,
    n: usize,
    line: Option<usize>,
) -> Result<bool> {
    match fields.get(name) {
        None => Ok(false),
        Some(Spanned {
            value: Value::Bool(b),
            ..
        }) => Ok(*b),
        Some(v) => Err(invalid(
            shown,
            line_of(&v.referenced).or(line),
            format!(
                "`{name}` of story {n} must be true or false, not {} `{}`",
                kind(&v.value),
                v.value
            ),
        )),
    }
}

/// Unique ids, and none is another plus a dash-suffix.
fn check_ids(shown: &str, entries: &[StoryEntry]) -> Result<()> {
    for (i, e) in entries.iter().enumerate() {
        for earlier in &entries[..i] {
            if earlier.id == e.id {
                return Err(invalid(
                    shown,
                    Some(e.line),
                    format!(
                        "the id {:?} is used twice (first at line {}); ids are unique",
                        e.id, earlier.line
                    ),
                ));
            }
        }
    }
    for e in entries {
        for other in entries {
            if other.id.len() > e.id.len()
                && other.id.starts_with(&e.id)
                && other.id.as_bytes()[e.id.len()] == b'-'
            {
                let (first, second) = if e.line <= other.line {
                    (e, other)
                } else {
                    (other, e)
                };
                return Err(invalid(
                    shown,
                    Some(second.line),
                    format!(
                        "the ids {:?} (line {}) and {:?} (line {}) clash: story files are matched as stories/{{id}}-*.md, so {:?} would also match the files of {:?}; rename one",
                        first.id, first.line, second.id, second.line, e.id, other.id
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn yaml_error(shown: &str, e: &serde_saphyr::Error) -> BmadError {
    let (line, first) = crate::sprint::yaml_error_at(e);
    invalid(shown, line, format!("not valid YAML: {first}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "# the story list\n- id: \"1\"\n  title: Spar frame\n  description: >-\n    Two crossed spars,\n    lashed.\n- id: '2'\n  title: Sail panel\n  description: Ripstop panel.\n  spec_checkpoint: true\n- id: \"3-1\"\n  title: Tail ribbon\n  description: A long ribbon.\n  done_checkpoint: false\n  invoke_dev_with: \"Reuse the ribbon clip.\"\n";

    fn refusal(text: &str) -> BmadError {
        parse("specs/kite/stories.yaml", text).unwrap_err()
    }

    #[test]
    fn a_well_formed_list_is_read_in_order_with_lines() {
        let stories = parse("s.yaml", GOOD).unwrap();
        let ids: Vec<&str> = stories.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["1", "2", "3-1"]);
        assert_eq!(stories[0].line, 2);
        assert_eq!(stories[0].description, "Two crossed spars, lashed.");
        assert_eq!(stories[1].line, 7);
        assert!(stories[1].spec_checkpoint && !stories[1].done_checkpoint);
        assert_eq!(stories[2].invoke_dev_with, "Reuse the ribbon clip.");
        assert!(!stories[0].spec_checkpoint);
    }

    #[test]
    fn a_prefix_clash_is_refused_with_both_lines() {
        let text = format!("{GOOD}- id: \"3\"\n  title: Tail\n  description: x\n");
        let e = refusal(&text);
        assert_eq!(e.code, CODE);
        assert!(e.message.contains("(line 16)"), "{}", e.message);
        assert!(e.message.contains("\"3-1\" (line 11)"), "{}", e.message);
        assert!(e.message.contains("clash"), "{}", e.message);
    }

    #[test]
    fn an_unquoted_or_non_string_id_is_refused() {
        let e = refusal("- id: 4\n  title: T\n  description: D\n");
        assert!(e.message.contains("(line 1)"), "{}", e.message);
        assert!(e.message.contains("the number `4`"), "{}", e.message);
        let e = refusal("- title: T\n  id: abc\n  description: D\n");
        assert!(e.message.contains("(line 2)"), "{}", e.message);
        assert!(e.message.contains("not quoted"), "{}", e.message);
        let e = refusal("- id: true\n  title: T\n  description: D\n");
        assert!(e.message.contains("boolean"), "{}", e.message);
        let e = refusal("- id: \"a/b\"\n  title: T\n  description: D\n");
        assert!(e.message.contains("'/'"), "{}", e.message);
        let e = refusal("- id: \"\"\n  title: T\n  description: D\n");
        assert!(e.message.contains("empty"), "{}", e.message);
        let long = "9".repeat(MAX_ID + 1);
        let e = refusal(&format!("- id: \"{long}\"\n  title: T\n  description: D\n"));
        assert!(e.message.contains("longer than"), "{}", e.message);
    }

    #[test]
    fn a_status_field_is_refused_where_it_is() {
        let e = refusal("- id: \"1\"\n  title: T\n  description: D\n  status: done\n");
        assert!(e.message.contains("(line 4)"), "{}", e.message);
        assert!(e.message.contains("`status` field"), "{}", e.message);
    }

    #[test]
    fn missing_or_empty_required_fields_are_refused() {
        let e =
            refusal("- id: \"1\"\n  title: T\n  description: D\n- id: \"2\"\n  description: D\n");
        assert!(e.message.contains("(line 4)"), "{}", e.message);
        assert!(
            e.message.contains("story 2 has no `title`"),
            "{}",
            e.message
        );
        let e = refusal("- id: \"1\"\n  title: T\n");
        assert!(e.message.contains("no `description`"), "{}", e.message);
        let e = refusal("- title: T\n  description: D\n");
        assert!(e.message.contains("no `id`"), "{}", e.message);
        let e = refusal("- id: \"1\"\n  title: \"  \"\n  description: D\n");
        assert!(
            e.message.contains("title of story 1 is empty"),
            "{}",
            e.message
        );
        let e = refusal("- id: \"1\"\n  title: [a]\n  description: D\n");
        assert!(e.message.contains("must be a string"), "{}", e.message);
        let e = refusal("- id: \"1\"\n  title: \"a\\nb\"\n  description: D\n");
        assert!(e.message.contains("one line"), "{}", e.message);
    }

    #[test]
    fn duplicate_ids_are_refused_at_the_second() {
        let e = refusal(
            "- id: \"1\"\n  title: T\n  description: D\n- id: \"1\"\n  title: U\n  description: E\n",
        );
        assert!(e.message.contains("(line 4)"), "{}", e.message);
        assert!(e.message.contains("first at line 1"), "{}", e.message);
    }

    #[test]
    fn the_shape_types_and_unknown_fields_are_checked() {
        let e = refusal("stories:\n  - id: \"1\"\n");
        assert!(e.message.contains("must be a YAML list"), "{}", e.message);
        assert!(refusal("").message.contains("empty"));
        assert!(refusal("[]\n").message.contains("empty"));
        let e = refusal("- \"1\"\n");
        assert!(e.message.contains("not a mapping"), "{}", e.message);
        let e = refusal("- id: \"1\"\n  title: T\n  description: D\n  spec_checkpoint: \"yes\"\n");
        assert!(
            e.message.contains("(line 4)") && e.message.contains("true or false"),
            "{}",
            e.message
        );
        let e = refusal("- id: \"1\"\n  title: T\n  description: D\n  owner: Ada\n");
        assert!(e.message.contains("unknown field `owner`"), "{}", e.message);
        let e = refusal("- id: \"1\"\n  title: T\n  title: U\n  description: D\n");
        assert!(e.message.contains("not valid YAML"), "{}", e.message);
        let e = refusal("- id: \"1\n  title: T\n");
        assert!(e.message.contains("not valid YAML"), "{}", e.message);
    }

    #[test]
    fn the_size_of_the_list_and_of_its_texts_is_bounded() {
        let many: String = (0..=MAX_STORIES)
            .map(|i| format!("- id: \"s{i}\"\n  title: T\n  description: D\n"))
            .collect();
        assert!(refusal(&many).message.contains("at most"));
        let long = "x".repeat(MAX_TEXT + 1);
        let e = refusal(&format!("- id: \"1\"\n  title: T\n  description: {long}\n"));
        assert!(e.message.contains("longer than"), "{}", e.message);
        let e = refusal(&format!(
            "- id: \"1\"\n  title: {}\n  description: D\n",
            "t".repeat(MAX_TITLE + 1)
        ));
        assert!(e.message.contains("longer than"), "{}", e.message);
    }
}
