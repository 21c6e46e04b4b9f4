//! What an `artifacts` entry may look like: a normalized path relative to the project root.
//!
//! Orchestrators open these paths; a model that records `../../etc/passwd`, `@state/...` or
//! `/tmp/x` would send them somewhere else, and `a//b` or `a/./b` would make two spellings of
//! one file look like two artifacts.

/// Why `path` is not a normalized project-relative path, or `None` when it is.
pub fn problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("the path is empty");
    }
    if path.chars().any(char::is_control) {
        return Some("control characters (such as NUL or a newline) are not allowed");
    }
    if path.contains('\\') {
        return Some("backslashes are not allowed; use '/' as the separator");
    }
    if path.starts_with('@') {
        return Some(
            "a mount prefix (@project/, @state/, ...) is not part of an artifact path; record it relative to the project root",
        );
    }
    if path.starts_with('/') {
        return Some("absolute paths are not allowed; record it relative to the project root");
    }
    if path.ends_with('/') {
        return Some("an artifact is a file: no trailing '/'");
    }
    for component in path.split('/') {
        match component {
            "" => return Some("empty path component ('a//b')"),
            "." => return Some("'.' components are not allowed"),
            ".." => return Some("'..' components are not allowed"),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::problem;

    #[test]
    fn normalized_relative_paths_pass() {
        for ok in [
            "artifacts/a.md",
            "a",
            "artifacts/stories/1-2 user auth.md",
            ".github/x.yml",
            "a/..b/c..",
            "café/ü.md",
        ] {
            assert_eq!(problem(ok), None, "{ok}");
        }
    }

    #[test]
    fn everything_else_is_refused() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/..",
            "./a",
            "a/./b",
            "a//b",
            "a/",
            "a\\b",
            "a\0b",
            "a\nb",
            "@project/a.md",
            "@state/workflow.md",
            "@anything/x",
            "@",
        ] {
            assert!(problem(bad).is_some(), "{bad:?}");
        }
    }
}
