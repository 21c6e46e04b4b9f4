//! The gate result files the position refinement and the scope verdict read, validated with
//! located errors: `verification.json` (`passed`, `gaps`), `review.json` (`verdict`), `uat.md`
//! (pass/fail lines) and a macro analysis's `conclusions.json` (`scope_verdict`).

use super::error::{InferError, Result};
use super::files::{self, MAX_RESULT_BYTES};
use super::inference::ScopeVerdict;
use serde_json::Value;
use std::path::Path;

/// At most this many gaps are carried, each cut to [`MAX_GAP_CHARS`].
pub const MAX_GAPS: usize = 20;
pub const MAX_GAP_CHARS: usize = 300;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    pub passed: bool,
    pub gaps: Vec<String>,
}

/// `verification.json`: `passed` must be a boolean; `gaps`, when present, an array of strings
/// or of objects with a text field.
pub fn verification(path: &Path) -> Result<Option<Verification>> {
    let Some(doc) = files::read_json(path, MAX_RESULT_BYTES)? else {
        return Ok(None);
    };
    let obj = doc
        .as_object()
        .ok_or_else(|| InferError::field(path, "(root)", "expected an object"))?;
    let passed = match obj.get("passed") {
        Some(Value::Bool(b)) => *b,
        None => return Err(InferError::field(path, "passed", "missing")),
        Some(_) => return Err(InferError::field(path, "passed", "expected true or false")),
    };
    let gaps = gap_list(path, "gaps", obj.get("gaps"))?;
    Ok(Some(Verification { passed, gaps }))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub blocked: bool,
    pub gaps: Vec<String>,
}

/// `review.json`: `verdict` must be a string (`BLOCK` blocks; any other verdict passes); the
/// gaps come from `gaps`, else `issues`, else `findings`.
pub fn review(path: &Path) -> Result<Option<Review>> {
    let Some(doc) = files::read_json(path, MAX_RESULT_BYTES)? else {
        return Ok(None);
    };
    let obj = doc
        .as_object()
        .ok_or_else(|| InferError::field(path, "(root)", "expected an object"))?;
    let blocked = match obj.get("verdict") {
        Some(Value::String(v)) => v.trim().eq_ignore_ascii_case("BLOCK"),
        None => return Err(InferError::field(path, "verdict", "missing")),
        Some(_) => return Err(InferError::field(path, "verdict", "expected a string")),
    };
    let key = ["gaps", "issues", "findings"]
        .into_iter()
        .find(|k| obj.get(*k).is_some_and(|v| !v.is_null()));
    let gaps = match key {
        Some(k) => gap_list(path, k, obj.get(k))?,
        None => Vec::new(),
    };
    Ok(Some(Review { blocked, gaps }))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Uat {
    AllPassed,
    /// The failing lines.
    Failures(Vec<String>),
    /// Neither a pass nor a failure is reported.
    Inconclusive,
}

/// `uat.md`: a line with a failure word (`fail`, `failed`, `failing`, `failure(s)`) or mark
/// (`❌`, `✗`) fails, unless it counts zero failures (`0 failed`, `failures: 0`); a line with
/// a pass word or mark (`pass`, `passed`, `✅`, `✓`, `[x]`) passes.
pub fn uat(path: &Path) -> Result<Option<Uat>> {
    let Some(text) = files::read_text(path, MAX_RESULT_BYTES)? else {
        return Ok(None);
    };
    let mut failures = Vec::new();
    let mut passes = 0usize;
    for line in text.lines() {
        let lower = line.to_lowercase();
        let ws: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let fail_word = ws
            .iter()
            .position(|w| matches!(*w, "fail" | "failed" | "failing" | "failure" | "failures"));
        let zero = fail_word.is_some_and(|i| {
            (i > 0 && ws[i - 1] == "0") || ws.get(i + 1).is_some_and(|w| *w == "0")
        });
        let failed = (fail_word.is_some() && !zero) || line.contains('❌') || line.contains('✗');
        if failed {
            failures.push(cut(line.trim()));
        } else if ws
            .iter()
            .any(|w| matches!(*w, "pass" | "passed" | "passes"))
            || line.contains('✅')
            || line.contains('✓')
            || lower.contains("[x]")
        {
            passes += 1;
        }
    }
    failures.truncate(MAX_GAPS);
    Ok(Some(if !failures.is_empty() {
        Uat::Failures(failures)
    } else if passes > 0 {
        Uat::AllPassed
    } else {
        Uat::Inconclusive
    }))
}

/// A macro analysis's `conclusions.json`: `scope_verdict` absent or null → unknown.
pub fn scope_verdict(path: &Path) -> Result<ScopeVerdict> {
    let Some(doc) = files::read_json(path, MAX_RESULT_BYTES)? else {
        return Ok(ScopeVerdict::Unknown);
    };
    let obj = doc
        .as_object()
        .ok_or_else(|| InferError::field(path, "(root)", "expected an object"))?;
    match obj.get("scope_verdict") {
        None | Some(Value::Null) => Ok(ScopeVerdict::Unknown),
        Some(Value::String(s)) => match s.as_str() {
            "large" => Ok(ScopeVerdict::Large),
            "medium" => Ok(ScopeVerdict::Medium),
            "small" => Ok(ScopeVerdict::Small),
            "unknown" => Ok(ScopeVerdict::Unknown),
            other => Err(InferError::field(
                path,
                "scope_verdict",
                format!(
                    "expected large, medium, small or unknown, got {:?}",
                    cut(other)
                ),
            )),
        },
        Some(_) => Err(InferError::field(
            path,
            "scope_verdict",
            "expected a string",
        )),
    }
}

/// A list of gaps: strings, or objects whose `description`, `summary`, `gap`, `title` or
/// `message` is a string.
fn gap_list(path: &Path, key: &str, v: Option<&Value>) -> Result<Vec<String>> {
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(InferError::field(path, key, "expected an array")),
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate().take(MAX_GAPS) {
        let text = match item {
            Value::String(s) => s.as_str(),
            Value::Object(o) => ["description", "summary", "gap", "title", "message"]
                .into_iter()
                .find_map(|k| o.get(k).and_then(Value::as_str))
                .ok_or_else(|| {
                    InferError::field(
                        path,
                        format!("{key}[{i}]"),
                        "expected a string or an object with a description",
                    )
                })?,
            _ => {
                return Err(InferError::field(
                    path,
                    format!("{key}[{i}]"),
                    "expected a string or an object",
                ));
            }
        };
        let text = cut(text.trim());
        if !text.is_empty() {
            out.push(text);
        }
    }
    Ok(out)
}

fn cut(s: &str) -> String {
    if s.chars().count() > MAX_GAP_CHARS {
        format!("{}…", s.chars().take(MAX_GAP_CHARS).collect::<String>())
    } else {
        s.to_string()
    }
}
