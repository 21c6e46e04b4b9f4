//! A ticket file (`<type>-<slug>.md`, or `<type>-<slug>-plan.md` as the draft names
//! it): its frontmatter joins it to its `[[entry]]` (`id`) and holds the build's `status`, and
//! `blocked_at` / `blocked_reason` when it waits on a person. The status is changed in place:
//! one value's bytes, every other byte of the file (comments, key order, unknown keys, the
//! body) unchanged.

use crate::stories_mode::frontmatter;

/// Every status BMAD's draft defines for a ticket (absent: no build has started).
pub const STATUSES: [&str; 8] = [
    "draft",
    "ready-for-dev",
    "in-progress",
    "in-review",
    "built",
    "done",
    "blocked",
    "dropped",
];

/// What a ticket file's frontmatter says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// `None`: not a ticket file (no frontmatter `id`).
    pub id: Option<u64>,
    pub status: Option<String>,
    pub blocked_at: Option<String>,
    pub blocked_reason: Option<String>,
}

fn scalar(v: Option<&serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) if s.trim().is_empty() => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Reads the frontmatter. `Err(field, problem)`: a frontmatter baton cannot read safely (not
/// YAML, an `id` that is no positive integer, a status BMAD does not define, a `status:` that
/// is not a plain one-line value).
pub fn meta(text: &str) -> Result<Meta, (&'static str, String)> {
    let Some(range) = crate::stories_mode::frontmatter::block(text) else {
        return Ok(Meta::default());
    };
    let options = serde_saphyr::options! { with_snippet: false };
    let yaml: serde_json::Value = serde_saphyr::from_str_with_options(&text[range], options)
        .map_err(|e| {
            let message = e.to_string();
            (
                "frontmatter",
                format!(
                    "is not valid YAML: {}",
                    message.lines().next().unwrap_or("").trim()
                ),
            )
        })?;
    let map = match &yaml {
        serde_json::Value::Object(m) => m,
        serde_json::Value::Null => return Ok(Meta::default()),
        _ => return Err(("frontmatter", "is not a YAML mapping".into())),
    };
    let id = match map.get("id") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Number(n)) => match n.as_u64() {
            Some(i) if i > 0 => Some(i),
            _ => return Err(("id", format!("{n} is not a positive integer"))),
        },
        Some(serde_json::Value::String(s)) => match s.trim().parse::<u64>() {
            Ok(i) if i > 0 => Some(i),
            _ => return Err(("id", format!("{s:?} is not a positive integer"))),
        },
        Some(other) => return Err(("id", format!("{other} is not a positive integer"))),
    };
    let status = match frontmatter::status(text) {
        Ok(frontmatter::Found::None) => None,
        Ok(frontmatter::Found::Status(s)) => Some(s),
        Err(problem) => return Err(("status", problem)),
    };
    if let Some(s) = &status
        && !STATUSES.contains(&s.as_str())
    {
        return Err((
            "status",
            format!(
                "{s:?} is not a status BMAD defines for a ticket ({})",
                STATUSES.join(", ")
            ),
        ));
    }
    Ok(Meta {
        id,
        status,
        blocked_at: scalar(map.get("blocked_at")),
        blocked_reason: scalar(map.get("blocked_reason")),
    })
}

/// The text with its frontmatter `status` set in place (a `status:` line added to a
/// frontmatter without one).
pub fn with_status(text: &str, status: &str) -> String {
    frontmatter::with_status(text, status)
}
