//! The frontmatter `status:` of a story file (`stories/{id}-*.md`), where BMAD 6.12's
//! folder+id mode keeps a story's status: read, and changed in place (one value's bytes, its
//! quoting kept; every other byte of the file unchanged).
//!
//! Statuses, in rank order: `draft` < `ready-for-dev` < `in-progress` < `in-review` < `done`;
//! `blocked` (a build that halted) and anything else is not ranked and never overwritten.

use std::ops::Range;

/// The statuses the loop walks through, in rank order.
pub const STATUSES: [&str; 5] = ["draft", "ready-for-dev", "in-progress", "in-review", "done"];

pub fn rank(status: &str) -> Option<usize> {
    STATUSES.iter().position(|s| *s == status)
}

/// What the frontmatter of a story file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The file has no frontmatter, or a frontmatter without `status`.
    None,
    /// `status:` and its value (quotes removed).
    Status(String),
}

/// The frontmatter block: the bytes between the opening `---` line and the closing one.
pub(crate) fn block(text: &str) -> Option<Range<usize>> {
    let first_end = text.find('\n')?;
    if text[..first_end].trim_end_matches('\r') != "---" {
        return None;
    }
    let start = first_end + 1;
    let mut at = start;
    for line in text[start..].split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare == "---" || bare == "..." {
            return Some(start..at);
        }
        at += line.len();
    }
    None
}

/// The top-level `status:` line of the frontmatter: the byte range of its value token.
fn status_token(text: &str) -> Option<Range<usize>> {
    let block = block(text)?;
    let mut at = block.start;
    for line in text[block.clone()].split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if let Some(rest) = bare.strip_prefix("status:") {
            let lead = rest.len() - rest.trim_start().len();
            let body = &rest[lead..];
            let len = match body.chars().next() {
                Some(q @ ('"' | '\'')) => body[1..].find(q).map_or(body.len(), |i| i + 2),
                _ => body
                    .find(" #")
                    .unwrap_or(body.len())
                    .min(body.trim_end().len()),
            };
            let start = at + "status:".len() + lead;
            return Some(start..start + len);
        }
        at += line.len();
    }
    None
}

fn unquote(token: &str) -> String {
    let t = token.trim();
    for q in ['"', '\''] {
        if let Some(inner) = t.strip_prefix(q).and_then(|t| t.strip_suffix(q)) {
            return inner.to_string();
        }
    }
    t.to_string()
}

/// The status the frontmatter holds. The block is also read as YAML, so a frontmatter the line
/// reading would misread (a `status` that is a list, a broken block) is refused: `Err` says why.
pub fn status(text: &str) -> Result<Found, String> {
    let Some(range) = block(text) else {
        return Ok(Found::None);
    };
    let options = serde_saphyr::options! { with_snippet: false };
    let yaml: serde_json::Value = serde_saphyr::from_str_with_options(&text[range], options)
        .map_err(|e| {
            let message = e.to_string();
            format!(
                "its frontmatter is not valid YAML: {}",
                message.lines().next().unwrap_or("").trim()
            )
        })?;
    let value = match &yaml {
        serde_json::Value::Object(map) => map.get("status"),
        serde_json::Value::Null => None,
        _ => return Err("its frontmatter is not a YAML mapping".into()),
    };
    match value {
        None | Some(serde_json::Value::Null) => Ok(Found::None),
        Some(serde_json::Value::String(s)) => {
            // The line reading must find the same value the YAML reading found.
            match status_token(text).map(|r| unquote(&text[r])) {
                Some(v) if v == *s => Ok(Found::Status(s.clone())),
                _ => Err("its frontmatter `status:` is not a plain one-line value".into()),
            }
        }
        Some(other) => Err(format!(
            "its frontmatter `status:` is {other}, not a status word"
        )),
    }
}

/// The text with its frontmatter status set to `status`: the value replaced in place (quotes
/// kept), a `status:` line added to a frontmatter without one, or a frontmatter added to a file
/// without one.
pub fn with_status(text: &str, status: &str) -> String {
    if let Some(range) = status_token(text) {
        let token = &text[range.clone()];
        let value = match token.chars().next() {
            Some('"') => format!("\"{status}\""),
            Some('\'') => format!("'{status}'"),
            _ => status.to_string(),
        };
        let mut out = text.to_string();
        out.replace_range(range, &value);
        return out;
    }
    if let Some(range) = block(text) {
        let mut out = text.to_string();
        out.insert_str(range.start, &format!("status: {status}\n"));
        return out;
    }
    format!("---\nstatus: {status}\n---\n\n{text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_is_read_from_the_frontmatter_only() {
        let spec = "---\ntitle: 'Sail panel'\nstatus: 'in-review'\n---\nStatus: done\n";
        assert_eq!(status(spec), Ok(Found::Status("in-review".into())));
        assert_eq!(
            status("---\nstatus: draft # planned\n---\n"),
            Ok(Found::Status("draft".into()))
        );
        assert_eq!(status("# Story\n\nStatus: done\n"), Ok(Found::None));
        assert_eq!(status("---\ntitle: x\n---\n"), Ok(Found::None));
        assert!(status("---\nstatus: [a]\n---\n").is_err());
        assert!(status("---\nstatus: \"a\n---\n").is_err());
        assert!(status("---\n  status: x\nstatus: y\n---\n").is_err());
    }

    #[test]
    fn the_status_changes_in_place() {
        let spec = "---\ntitle: 'Sail panel'\nstatus: 'draft'\ncreated: x\n---\n\nbody\n";
        assert_eq!(
            with_status(spec, "ready-for-dev"),
            "---\ntitle: 'Sail panel'\nstatus: 'ready-for-dev'\ncreated: x\n---\n\nbody\n"
        );
        assert_eq!(
            with_status("---\nstatus: draft # planned\n---\n", "done"),
            "---\nstatus: done # planned\n---\n"
        );
        assert_eq!(
            with_status("---\ntitle: x\n---\nbody\n", "draft"),
            "---\nstatus: draft\ntitle: x\n---\nbody\n"
        );
        assert_eq!(
            with_status("# Story 2\n", "ready-for-dev"),
            "---\nstatus: ready-for-dev\n---\n\n# Story 2\n"
        );
        let crlf = "---\r\nstatus: \"draft\"\r\n---\r\n";
        assert_eq!(
            with_status(crlf, "done"),
            "---\r\nstatus: \"done\"\r\n---\r\n"
        );
        assert_eq!(status(crlf), Ok(Found::Status("draft".into())));
    }

    #[test]
    fn ranks_follow_the_spec_lifecycle() {
        assert!(rank("draft") < rank("ready-for-dev"));
        assert!(rank("in-review") < rank("done"));
        assert_eq!(rank("blocked"), None);
    }
}
