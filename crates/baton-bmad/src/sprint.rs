//! `sprint-status.yaml`: read in BMAD's format and edited in place.
//!
//! The file is parsed twice: as YAML (so a malformed file is refused with its line), and line
//! by line, to find the byte span of every `development_status` value. Both readings must agree
//! before anything is edited. An edit replaces the bytes of one value (keeping its quotes), so
//! every comment, blank line, key order and unknown key survives byte for byte. A status is
//! never lowered, and `last_updated` is refreshed when the key exists.

use super::error::{BmadError, Result};
use super::keys::{self, KeyKind};
use super::layout::ArtifactFile;
use baton_autopilot::untrusted::limit;
use serde_json::Value;
use std::ops::Range;

pub use crate::layout::SPRINT_STATUS as FILE_NAME;

/// One `development_status` entry, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub kind: KeyKind,
    /// The value as written (quotes removed); legacy values are not mapped here.
    pub status: String,
    /// 1-based line.
    pub line: usize,
    /// Bytes of the value token, quotes included.
    span: Range<usize>,
}

impl Entry {
    /// The status with legacy values mapped (`drafted` → `ready-for-dev`, …).
    pub fn normalized(&self) -> &str {
        keys::normalized(&self.kind, &self.status)
    }
}

#[derive(Debug, Clone)]
pub struct SprintStatus {
    /// `None` for a text parsed without a file (tests).
    file: Option<ArtifactFile>,
    /// How the file is named in messages (project-relative).
    shown: String,
    text: String,
    entries: Vec<Entry>,
    last_updated: Option<Range<usize>>,
}

fn invalid(shown: &str, line: Option<usize>, problem: impl std::fmt::Display) -> BmadError {
    let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
    BmadError::usage("SPRINT_STATUS_INVALID", format!("{shown}{at}: {problem}")).hint(
        "fix the file (BMAD's sprint-planning workflow writes it), then run the command again",
    )
}

/// A sprint file written before BMAD had a sprint-status template: a `sprints:` (or `epics:`)
/// list of epics holding `stories:` lists, no `development_status`. Refused, naming the shape
/// and its line.
fn pre_template(
    shown: &str,
    yaml: &serde_json::Map<String, Value>,
    text: &str,
) -> Option<BmadError> {
    let key = ["sprints", "epics"]
        .into_iter()
        .find(|k| matches!(yaml.get(*k), Some(Value::Array(_) | Value::Object(_))))?;
    let line = text
        .lines()
        .position(|l| l.starts_with(&format!("{key}:")))
        .map(|i| i + 1);
    Some(
        BmadError::usage(
            "SPRINT_STATUS_INVALID",
            format!(
                "{shown}{}: a hand-written sprint file from before BMAD's sprint-status template (a `{key}:` list of epics and stories, no `development_status` mapping); baton reads the template's `development_status`",
                line.map(|l| format!(" (line {l})")).unwrap_or_default()
            ),
        )
        .hint("run BMAD's sprint-planning workflow to write sprint-status.yaml in the template's shape (move this file aside first to keep it), or set [autopilot] implementation_artifacts in baton.toml to the folder of a template-shaped file"),
    )
}

impl SprintStatus {
    /// Reads and checks the file; `shown` names it in messages.
    pub fn load(file: &ArtifactFile, shown: &str) -> Result<SprintStatus> {
        let Some(bytes) = file.read(limit::STATUS)? else {
            return Err(BmadError::usage(
                "SPRINT_STATUS_MISSING",
                format!("{shown} does not exist"),
            )
            .hint("run BMAD's sprint-planning workflow first, or set [autopilot] implementation_artifacts in baton.toml"));
        };
        let text = String::from_utf8(bytes)
            .map_err(|e| invalid(shown, None, format!("is not UTF-8 text ({e})")))?;
        let mut status = SprintStatus::parse(shown, text)?;
        status.file = Some(file.clone());
        Ok(status)
    }

    pub fn parse(shown: &str, text: String) -> Result<SprintStatus> {
        let yaml = parse_yaml(shown, &text)?;
        let Some(dev) = yaml.get("development_status") else {
            if let Some(e) = pre_template(shown, &yaml, &text) {
                return Err(e);
            }
            return Err(invalid(
                shown,
                None,
                "there is no development_status mapping",
            ));
        };
        let Value::Object(dev) = dev else {
            return Err(invalid(
                shown,
                None,
                "development_status must be a mapping of key: status",
            ));
        };
        if dev.is_empty() {
            return Err(invalid(shown, None, "development_status is empty"));
        }
        let (entries, last_updated) = scan(shown, &text)?;
        // The line reading must find exactly what the YAML reading found, in the same order.
        if entries.len() != dev.len() {
            return Err(unsupported(shown, None));
        }
        for (entry, (key, value)) in entries.iter().zip(dev) {
            let Some(status) = value.as_str() else {
                return Err(invalid(
                    shown,
                    Some(entry.line),
                    format!("development_status.{key} must be a status string"),
                ));
            };
            if entry.key != *key || entry.status != status {
                return Err(unsupported(shown, Some(entry.line)));
            }
        }
        let last_updated = match yaml.get("last_updated") {
            Some(Value::String(_)) => last_updated,
            _ => None,
        };
        Ok(SprintStatus {
            file: None,
            shown: shown.to_string(),
            text,
            entries,
            last_updated,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn shown(&self) -> &str {
        &self.shown
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.key == key)
    }

    /// The stories of epic `n`, in file order.
    pub fn stories_of(&self, n: u32) -> impl Iterator<Item = &Entry> {
        self.entries
            .iter()
            .filter(move |e| e.kind == KeyKind::Story { epic: n })
    }

    /// The `epic-N` entry of epic `n`.
    pub fn epic_entry(&self, n: u32) -> Option<&Entry> {
        self.entries.iter().find(|e| e.kind == KeyKind::Epic(n))
    }

    /// Sets `key` to `status` unless that would lower it (or it is already there), or the
    /// current value is one BMAD does not define (`blocked`, `deferred`, …: only a person
    /// changes those, see [`SprintStatus::set_consented`]). Returns whether the text changed;
    /// `now` is what `last_updated` becomes (RFC 3339).
    pub fn raise(&mut self, key: &str, status: &str, now: &str) -> Result<bool> {
        let i = self.index_of(key, status)?;
        let entry = &self.entries[i];
        let Some(current) = keys::rank(&entry.kind, &entry.status) else {
            return Ok(false);
        };
        if keys::rank(&entry.kind, status).is_some_and(|new| current >= new) {
            return Ok(false);
        }
        self.write_value(i, status, now);
        Ok(true)
    }

    /// Sets `key` to `status` (a status BMAD defines) because a person said so: the one write
    /// that replaces a value BMAD does not define. A defined value is still only raised.
    pub fn set_consented(&mut self, key: &str, status: &str, now: &str) -> Result<bool> {
        let i = self.index_of(key, status)?;
        let entry = &self.entries[i];
        if keys::defined(&entry.kind, &entry.status) {
            return self.raise(key, status, now);
        }
        self.write_value(i, status, now);
        Ok(true)
    }

    /// The entry of `key`, checked to accept `status`.
    fn index_of(&self, key: &str, status: &str) -> Result<usize> {
        let Some(i) = self.entries.iter().position(|e| e.key == key) else {
            return Err(BmadError::usage(
                "STORY_NOT_FOUND",
                format!("{} has no key {key}", self.shown),
            ));
        };
        if !keys::defined(&self.entries[i].kind, status) {
            return Err(BmadError::failure(
                "SPRINT_STATUS_INVALID",
                format!("{status} is not a status of {key}"),
            ));
        }
        Ok(i)
    }

    /// Replaces the value of entry `i` (keeping its quotes) and refreshes `last_updated`.
    fn write_value(&mut self, i: usize, status: &str, now: &str) {
        let entry = &self.entries[i];
        let span = entry.span.clone();
        let token = requote(&self.text[span.clone()], status);
        self.replace(span, &token);
        self.entries[i].status = status.to_string();
        if let Some(range) = self.last_updated.clone() {
            let token = requote(
                &self.text[range.clone()],
                &stamp_like(&self.text[range.clone()], now),
            );
            self.replace(range, &token);
        }
    }

    /// Replaces bytes and shifts the spans that follow.
    fn replace(&mut self, range: Range<usize>, with: &str) {
        let delta = with.len() as isize - range.len() as isize;
        let shift = |r: &mut Range<usize>| {
            if r.start >= range.end {
                r.start = (r.start as isize + delta) as usize;
                r.end = (r.end as isize + delta) as usize;
            } else if r.start == range.start {
                r.end = (r.end as isize + delta) as usize;
            }
        };
        for e in &mut self.entries {
            shift(&mut e.span);
        }
        if let Some(r) = self.last_updated.as_mut() {
            shift(r);
        }
        self.text.replace_range(range, with);
    }

    /// Writes the text durably (temp file, fsync, rename, fsync of the directory).
    pub fn save(&self) -> Result<()> {
        match &self.file {
            Some(file) => file.write(self.text.as_bytes()),
            None => Err(BmadError::failure(
                "EPIC_IO_FAILED",
                format!("{} was not read from a file", self.shown),
            )),
        }
    }
}

fn unsupported(shown: &str, line: Option<usize>) -> BmadError {
    let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
    BmadError::usage(
        "SPRINT_STATUS_UNSUPPORTED",
        format!(
            "{shown}{at}: development_status must be a block mapping with one `key: status` per line"
        ),
    )
    .hint("write development_status the way BMAD's sprint-planning does: one indented `key: status` line per entry")
}

fn parse_yaml(shown: &str, text: &str) -> Result<serde_json::Map<String, Value>> {
    let options = serde_saphyr::options! { with_snippet: false };
    match serde_saphyr::from_str_with_options::<Value>(text, options) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(invalid(shown, None, "the file is not a YAML mapping")),
        Err(e) => {
            let (line, first) = yaml_error_at(&e);
            Err(invalid(shown, line, format!("not valid YAML: {first}")))
        }
    }
}

/// Where a YAML error is (its line, when known) and the first line of what it says.
pub(crate) fn yaml_error_at(e: &serde_saphyr::Error) -> (Option<usize>, String) {
    let line = e
        .location()
        .and_then(|l| usize::try_from(l.line()).ok())
        .filter(|l| *l > 0);
    let message = e.to_string();
    let first = message.lines().next().unwrap_or("").trim().to_string();
    (line, first)
}

/// Lines with their byte offset, without the line end.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split_inclusive('\n').map(move |raw| {
        let start = offset;
        offset += raw.len();
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        let line = line.strip_suffix('\r').unwrap_or(line);
        (start, line)
    })
}

type Scanned = (Vec<Entry>, Option<Range<usize>>);

/// Finds the `development_status` entries and the `last_updated` value by reading lines.
fn scan(shown: &str, text: &str) -> Result<Scanned> {
    let mut entries = Vec::new();
    let mut last_updated = None;
    let mut in_block = false;
    for (n, (start, line)) in lines(text).enumerate() {
        let number = n + 1;
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indented = trimmed.len() != line.len();
        if !indented {
            in_block = false;
            let Some((key, rest, rest_at)) = split_key(line) else {
                continue;
            };
            match key.as_str() {
                "development_status" => {
                    if !is_empty_or_comment(rest) {
                        return Err(unsupported(shown, Some(number)));
                    }
                    in_block = true;
                }
                "last_updated" => {
                    last_updated = value_token(rest)
                        .map(|r| start + rest_at + r.start..start + rest_at + r.end);
                }
                _ => {}
            }
            continue;
        }
        if !in_block {
            continue;
        }
        let indent = line.len() - trimmed.len();
        let Some((key, rest, rest_at)) = split_key(trimmed) else {
            return Err(unsupported(shown, Some(number)));
        };
        let Some(token) = value_token(rest) else {
            return Err(invalid(
                shown,
                Some(number),
                format!("development_status.{key} has no status"),
            ));
        };
        let raw = &rest[token.clone()];
        let status = unquote(raw).ok_or_else(|| unsupported(shown, Some(number)))?;
        let at = start + indent + rest_at;
        entries.push(Entry {
            kind: keys::classify(&key),
            key,
            status,
            line: number,
            span: at + token.start..at + token.end,
        });
    }
    Ok((entries, last_updated))
}

fn is_empty_or_comment(rest: &str) -> bool {
    let t = rest.trim();
    t.is_empty() || t.starts_with('#')
}

/// `key: rest` → (key, rest, byte offset of rest in `line`). Keys may be quoted.
fn split_key(line: &str) -> Option<(String, &str, usize)> {
    let (key, after) = if let Some(q @ ('"' | '\'')) = line.chars().next() {
        let close = line[1..].find(q)? + 1;
        (line[1..close].to_string(), close + 1)
    } else {
        let colon = line.find(':')?;
        (line[..colon].trim_end().to_string(), colon)
    };
    let rest_at = after + line[after..].find(':')? + 1;
    let between = &line[after..rest_at - 1];
    if !between.trim().is_empty() || key.is_empty() {
        return None;
    }
    // `key:value` without a space is a plain scalar in YAML, not a mapping entry.
    let rest = &line[rest_at..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    Some((key, rest, rest_at))
}

/// The byte range of the scalar token in `rest` (after `key:`), without a trailing comment.
fn value_token(rest: &str) -> Option<Range<usize>> {
    let lead = rest.len() - rest.trim_start().len();
    let body = &rest[lead..];
    if body.is_empty() || body.starts_with('#') {
        return None;
    }
    let len = match body.chars().next() {
        Some('"') => closing_double(body)? + 1,
        Some('\'') => closing_single(body)? + 1,
        _ => {
            let end = body
                .find(" #")
                .or_else(|| body.find("\t#"))
                .unwrap_or(body.len());
            body[..end].trim_end().len()
        }
    };
    Some(lead..lead + len)
}

fn closing_double(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

fn closing_single(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The status text of a token; `None` for escapes this editor does not handle.
fn unquote(token: &str) -> Option<String> {
    if let Some(inner) = token.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        return (!inner.contains('\\')).then(|| inner.to_string());
    }
    if let Some(inner) = token.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
        return Some(inner.replace("''", "'"));
    }
    Some(token.to_string())
}

/// `value` in the quoting style of `token`.
fn requote(token: &str, value: &str) -> String {
    match token.chars().next() {
        Some('"') => format!("\"{value}\""),
        Some('\'') => format!("'{}'", value.replace('\'', "''")),
        _ => value.to_string(),
    }
}

/// `now` (RFC 3339, `2026-11-22T08:39:48Z`) in the shape of the current value: a date, a date
/// and minutes (`2026-11-22 08:39`, BMAD's format), `MM-DD-YYYY HH:MM`, or RFC 3339.
fn stamp_like(current: &str, now: &str) -> String {
    let cur = unquote(current).unwrap_or_default();
    let date = now.get(..10).unwrap_or(now);
    let minutes = now.get(11..16).unwrap_or("00:00");
    let is_digits = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit() || b == b'-' || b == b':')
    };
    if cur.len() == 10 && is_digits(&cur) && cur.as_bytes()[4] == b'-' {
        date.to_string()
    } else if cur.len() == 16 && cur.as_bytes().get(10) == Some(&b' ') {
        if cur.as_bytes()[2] == b'-' {
            // MM-DD-YYYY HH:MM
            let (y, m, d) = (
                date.get(..4).unwrap_or(""),
                date.get(5..7).unwrap_or(""),
                date.get(8..10).unwrap_or(""),
            );
            format!("{m}-{d}-{y} {minutes}")
        } else {
            format!("{date} {minutes}")
        }
    } else {
        now.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# generated: 2026-11-20 10:00\n# STATUS DEFINITIONS: keep me\n\ngenerated: 2026-11-20 10:00\nlast_updated: 2026-11-20 10:00\nproject: taskboard\nproject_key: NOKEY\ntracking_system: file-system\nstory_location: \"{project-root}/_bmad-output/implementation-artifacts\"\n\ndevelopment_status:\n  # Epic 1\n  epic-1: backlog\n  1-1-project-scaffold: backlog   # first\n  1-2-user-authentication: \"drafted\"\n  epic-1-retrospective: optional\n\n  epic-2: 'backlog'\n  2-1-create-board: backlog\nunknown_key: kept\n";

    fn sample() -> SprintStatus {
        SprintStatus::parse("s.yaml", SAMPLE.to_string()).unwrap()
    }

    #[test]
    fn entries_in_file_order_with_kinds() {
        let s = sample();
        let keys: Vec<&str> = s.entries().iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "epic-1",
                "1-1-project-scaffold",
                "1-2-user-authentication",
                "epic-1-retrospective",
                "epic-2",
                "2-1-create-board"
            ]
        );
        assert_eq!(
            s.get("1-2-user-authentication").unwrap().normalized(),
            "ready-for-dev"
        );
        assert_eq!(s.stories_of(1).count(), 2);
    }

    #[test]
    fn an_edit_changes_only_the_value_and_keeps_quotes() {
        let mut s = sample();
        assert!(
            s.raise(
                "1-1-project-scaffold",
                "in-progress",
                "2026-11-22T08:39:48Z"
            )
            .unwrap()
        );
        assert!(
            s.raise("1-2-user-authentication", "review", "2026-11-22T08:39:48Z")
                .unwrap()
        );
        assert!(
            s.raise("epic-2", "in-progress", "2026-11-22T08:39:48Z")
                .unwrap()
        );
        let expected = SAMPLE
            .replace(
                "1-1-project-scaffold: backlog",
                "1-1-project-scaffold: in-progress",
            )
            .replace("\"drafted\"", "\"review\"")
            .replace("'backlog'", "'in-progress'")
            .replace(
                "last_updated: 2026-11-20 10:00",
                "last_updated: 2026-11-22 08:39",
            );
        assert_eq!(s.text(), expected);
        // The edited text reads back the same way.
        let again = SprintStatus::parse("s.yaml", s.text().to_string()).unwrap();
        assert_eq!(again.get("epic-2").unwrap().status, "in-progress");
    }

    #[test]
    fn a_status_is_never_lowered() {
        let mut s = sample();
        assert!(
            !s.raise(
                "1-2-user-authentication",
                "ready-for-dev",
                "2026-11-22T08:39:48Z"
            )
            .unwrap()
        );
        assert!(
            !s.raise("1-2-user-authentication", "backlog", "2026-11-22T08:39:48Z")
                .unwrap()
        );
        assert_eq!(s.text(), SAMPLE);
    }

    /// Keys outside BMAD's grammar and values BMAD does not define, as real projects have them.
    const ODD: &str = "last_updated: \"2026-11-20 10:00\"\ndevelopment_status:\n  epic-1: in-progress\n  1-1-a: backlog\n  1-2-b: blocked   # waits on the vendor\n  1-3-c: \"In progress\"\n  epic-1-retro-item-1: open\n  2.5-1-frost: backlog\n  epic-3a: in-progress\n  3a-1-perch: ready-for-dev\n  15-TD-1-dock: backlog\n  epic-2: blocked\n  2-1-x: backlog\n  epic-4: docs/archive/epics.yaml\n  epic-1-retrospective: completed\n";

    #[test]
    fn unrecognized_keys_and_undefined_values_are_never_written() {
        let mut s = SprintStatus::parse("s.yaml", ODD.to_string()).unwrap();
        let now = "2026-11-22T08:39:48Z";
        // Undefined values are not raised, whatever is asked.
        for (key, status) in [
            ("1-2-b", "in-progress"),
            ("1-3-c", "review"),
            ("epic-2", "in-progress"),
            ("epic-2", "done"),
            ("epic-4", "done"),
        ] {
            assert!(!s.raise(key, status, now).unwrap(), "{key}");
        }
        assert_eq!(s.text(), ODD);
        // Unrecognized keys have no status the loop could write.
        for key in [
            "2.5-1-frost",
            "epic-3a",
            "3a-1-perch",
            "epic-1-retro-item-1",
        ] {
            assert_eq!(
                s.raise(key, "done", now).unwrap_err().code,
                "SPRINT_STATUS_INVALID"
            );
        }
        assert_eq!(s.text(), ODD);
        // A run's writes change only their values and last_updated.
        assert!(s.raise("1-1-a", "in-progress", now).unwrap());
        assert!(s.raise("2-1-x", "ready-for-dev", now).unwrap());
        let expected = ODD
            .replace("1-1-a: backlog", "1-1-a: in-progress")
            .replace("2-1-x: backlog", "2-1-x: ready-for-dev")
            .replace("\"2026-11-20 10:00\"", "\"2026-11-22 08:39\"");
        assert_eq!(s.text(), expected);
        // A person's consent replaces an undefined value (and only raises a defined one).
        assert!(s.set_consented("epic-2", "in-progress", now).unwrap());
        assert!(!s.set_consented("1-1-a", "backlog", now).unwrap());
        assert_eq!(
            s.text(),
            expected.replace("epic-2: blocked", "epic-2: in-progress")
        );
        let again = SprintStatus::parse("s.yaml", s.text().to_string()).unwrap();
        assert_eq!(again.entries().len(), 13);
        assert_eq!(again.epic_entry(2).unwrap().status, "in-progress");
    }

    #[test]
    fn malformed_and_unsupported_files_are_refused_with_a_code() {
        let bad = |text: &str| SprintStatus::parse("s", text.to_string()).unwrap_err().code;
        assert_eq!(bad("development_status: [\n"), "SPRINT_STATUS_INVALID");
        assert_eq!(bad("project: x\n"), "SPRINT_STATUS_INVALID");
        assert_eq!(bad("development_status: {}\n"), "SPRINT_STATUS_INVALID");
        assert_eq!(
            bad("development_status: {epic-1: backlog}\n"),
            "SPRINT_STATUS_UNSUPPORTED"
        );
        assert_eq!(
            bad("development_status:\n  epic-1:\n    nested: x\n"),
            "SPRINT_STATUS_INVALID"
        );
    }

    #[test]
    fn last_updated_keeps_its_shape() {
        assert_eq!(
            stamp_like("2026-01-01", "2026-11-22T08:39:48Z"),
            "2026-11-22"
        );
        assert_eq!(
            stamp_like("\"01-02-2026 10:00\"", "2026-11-22T08:39:48Z"),
            "11-22-2026 08:39"
        );
        assert_eq!(
            stamp_like("2026-01-01T00:00:00Z", "2026-11-22T08:39:48Z"),
            "2026-11-22T08:39:48Z"
        );
    }
}
