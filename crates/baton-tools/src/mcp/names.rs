//! Tool names: `mcp__<server>__<tool>`, within what every provider accepts
//! (`^[a-zA-Z0-9_-]{1,64}$`), unique per server.

use std::collections::HashSet;

pub const PREFIX: &str = "mcp__";
const MAX_NAME: usize = 64;

/// The exposed name of `tool` of `server`, not in `taken`; `None` when no short enough unique
/// name exists.
pub fn exposed(server: &str, tool: &str, taken: &HashSet<String>) -> Option<String> {
    let head = format!("{PREFIX}{server}__");
    let room = MAX_NAME.checked_sub(head.len())?;
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        return None;
    }
    for n in 1..100 {
        let suffix = if n == 1 {
            String::new()
        } else {
            format!("_{n}")
        };
        let keep = room.checked_sub(suffix.len())?;
        let base: String = clean.chars().take(keep).collect();
        let name = format!("{head}{base}{suffix}");
        if !taken.contains(&name) {
            return Some(name);
        }
    }
    None
}

/// `(server, rest)` of an exposed name.
pub fn split(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix(PREFIX)?.split_once("__")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_unique_and_split_back() {
        let mut taken = HashSet::new();
        let a = exposed("files", "read.file", &taken).unwrap();
        assert_eq!(a, "mcp__files__read_file");
        taken.insert(a.clone());
        let b = exposed("files", "read/file", &taken).unwrap();
        assert_eq!(b, "mcp__files__read_file_2");
        let long = exposed("files", &"x".repeat(200), &taken).unwrap();
        assert_eq!(long.len(), 64);
        assert_eq!(split(&a), Some(("files", "read_file")));
        assert_eq!(split("fs.read"), None);
        assert!(exposed("files", "", &taken).is_none());
    }
}
