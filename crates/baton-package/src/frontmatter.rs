//! Splitting a markdown file into its YAML frontmatter and body, and parsing the YAML.
//!
//! Rules (compatible with the reference Builder): the opening `---` must be the first line
//! (a UTF-8 BOM before it is fine, blank lines are not); the block ends at the next line that is
//! `---`; LF and CRLF line endings are both accepted; an empty block means `{}`.

use serde_json::Value;

/// A markdown file split at its frontmatter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split<'a> {
    /// The YAML text between the fences (without them).
    pub yaml: &'a str,
    /// 1-based file line of the first YAML line.
    pub yaml_first_line: u32,
    /// Everything after the closing fence line.
    pub body: &'a str,
    /// 1-based file line where the body starts.
    pub body_first_line: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitError {
    /// The file does not start with `---`.
    Missing,
    /// The file starts with blank lines or spaces before `---`.
    LeadingWhitespace,
    /// `---` opens a block that is never closed.
    Unclosed,
}

impl SplitError {
    pub fn message(self) -> &'static str {
        match self {
            SplitError::Missing => "the file has no YAML frontmatter",
            SplitError::LeadingWhitespace => "the frontmatter must start on the first line",
            SplitError::Unclosed => "the frontmatter is opened with '---' but never closed",
        }
    }

    pub fn hint(self) -> &'static str {
        match self {
            SplitError::Missing => {
                "start the file with a '---' line, the YAML fields, and a closing '---' line"
            }
            SplitError::LeadingWhitespace => {
                "remove the blank lines or spaces before the opening '---'"
            }
            SplitError::Unclosed => "add a line '---' after the last YAML field",
        }
    }
}

fn is_fence(line: &str) -> bool {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    line.strip_prefix("---")
        .is_some_and(|rest| rest.chars().all(|c| c == ' ' || c == '\t'))
}

/// Splits `text` into frontmatter and body.
pub fn split(text: &str) -> Result<Split<'_>, SplitError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let Some(first) = lines.next() else {
        return Err(SplitError::Missing);
    };
    if !is_fence(first) {
        let trimmed = text.trim_start();
        return Err(
            if trimmed.len() != text.len() && trimmed.starts_with("---") {
                SplitError::LeadingWhitespace
            } else {
                SplitError::Missing
            },
        );
    }
    if !first.ends_with('\n') {
        return Err(SplitError::Unclosed);
    }
    let yaml_start = first.len();
    let mut offset = yaml_start;
    for (line_no, line) in (2u32..).zip(lines) {
        if is_fence(line) {
            let yaml = &text[yaml_start..offset];
            let body = &text[offset + line.len()..];
            return Ok(Split {
                yaml,
                yaml_first_line: 2,
                body,
                body_first_line: line_no + 1,
            });
        }
        offset += line.len();
    }
    Err(SplitError::Unclosed)
}

/// A YAML problem with the 1-based line inside the YAML text when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    pub message: String,
    pub line: Option<u32>,
}

/// Parses a frontmatter block into a JSON value (a mapping). Bounded by serde-saphyr's default
/// budget, so alias bombs and deep nesting fail instead of exhausting memory.
pub fn parse_yaml_mapping(yaml: &str) -> Result<serde_json::Map<String, Value>, YamlError> {
    if yaml.trim().is_empty() {
        return Ok(serde_json::Map::new());
    }
    let options = serde_saphyr::options! {
        with_snippet: false,
    };
    match serde_saphyr::from_str_with_options::<Value>(yaml, options) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(Value::Null) => Ok(serde_json::Map::new()),
        Ok(other) => Err(YamlError {
            message: format!(
                "the frontmatter is a YAML {}, not a mapping of fields",
                kind(&other)
            ),
            line: Some(1),
        }),
        Err(e) => Err(YamlError {
            message: first_line(&e.to_string()),
            line: e
                .location()
                .and_then(|l| u32::try_from(l.line()).ok())
                .filter(|l| *l > 0),
        }),
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or(s).trim().to_string()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "sequence",
        Value::Object(_) => "mapping",
    }
}

/// 1-based line (within the YAML text) of a top-level key, for locating schema errors.
pub fn top_level_key_line(yaml: &str, key: &str) -> Option<u32> {
    yaml.lines()
        .position(|line| {
            let line = line.trim_end_matches('\r');
            let unquoted = line
                .strip_prefix(key)
                .or_else(|| line.strip_prefix(&format!("\"{key}\"")))
                .or_else(|| line.strip_prefix(&format!("'{key}'")));
            unquoted.is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .and_then(|i| u32::try_from(i + 1).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lf_crlf_and_bom() {
        let s = split("---\na: 1\n---\nbody\n").unwrap();
        assert_eq!(s.yaml, "a: 1\n");
        assert_eq!(s.body, "body\n");
        assert_eq!(s.body_first_line, 4);
        let s = split("\u{feff}---\r\na: 1\r\n---\r\nbody").unwrap();
        assert_eq!(s.yaml, "a: 1\r\n");
        assert_eq!(s.body, "body");
    }

    #[test]
    fn empty_block_is_an_empty_mapping() {
        let s = split("---\n---\n").unwrap();
        assert_eq!(s.yaml, "");
        assert!(parse_yaml_mapping(s.yaml).unwrap().is_empty());
    }

    #[test]
    fn reports_missing_leading_and_unclosed() {
        assert_eq!(split("# title\n"), Err(SplitError::Missing));
        assert_eq!(split(""), Err(SplitError::Missing));
        assert_eq!(
            split("\n---\na: 1\n---\n"),
            Err(SplitError::LeadingWhitespace)
        );
        assert_eq!(split("---\na: 1\n"), Err(SplitError::Unclosed));
        assert_eq!(split("---"), Err(SplitError::Unclosed));
    }

    #[test]
    fn yaml_errors_carry_a_line() {
        let err = parse_yaml_mapping("a: 1\nb: [unclosed\n").unwrap_err();
        assert!(err.line.is_some(), "{err:?}");
        let err = parse_yaml_mapping("- a\n- b\n").unwrap_err();
        assert!(err.message.contains("sequence"));
    }

    #[test]
    fn finds_top_level_keys() {
        assert_eq!(top_level_key_line("a: 1\nnodeId: x\n", "nodeId"), Some(2));
        assert_eq!(top_level_key_line("a: 1\n", "nodeId"), None);
    }
}
