//! Reading and writing the autopilot's JSON files: syntax errors with their line, field checks
//! that name the field (a JSON pointer), and durable writes.

use super::error::{EpicError, Result};
use baton_autopilot::json_kind::json_kind;
use baton_bmad::layout::ArtifactFile;
use serde_json::{Map, Value};

/// Reads a JSON object of at most `limit` bytes (a regular file, through the folder's
/// handle); `Ok(None)` when the file does not exist.
pub fn read_object(
    file: &ArtifactFile,
    shown: &str,
    code: &'static str,
    limit: u64,
) -> Result<Option<Map<String, Value>>> {
    let Some(bytes) = file.read(limit)? else {
        return Ok(None);
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(_) => Err(EpicError::invalid_file(
            code,
            shown,
            None,
            "must be a JSON object",
        )),
        Err(e) => Err(EpicError::invalid_file(
            code,
            shown,
            None,
            format!(
                "not valid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ),
        )),
    }
}

/// Pretty JSON (2 spaces) with a final newline, written durably.
pub fn write_object(file: &ArtifactFile, doc: &Map<String, Value>) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(doc)
        .map_err(|e| EpicError::failure("EPIC_IO_FAILED", e.to_string()))?;
    bytes.push(b'\n');
    file.write(&bytes)
}

/// Removes a file; a missing file is fine.
pub fn remove(file: &ArtifactFile) -> Result<()> {
    file.remove()
}

/// Checks the fields of one JSON object and reports the first problem with its pointer.
pub struct Fields<'a> {
    pub map: &'a Map<String, Value>,
    /// JSON pointer of `map` in the document (`""` for the top).
    pub at: String,
    pub file: &'a str,
    pub code: &'static str,
}

impl<'a> Fields<'a> {
    pub fn top(map: &'a Map<String, Value>, file: &'a str, code: &'static str) -> Fields<'a> {
        Fields {
            map,
            at: String::new(),
            file,
            code,
        }
    }

    fn err(&self, key: &str, problem: impl std::fmt::Display) -> EpicError {
        EpicError::invalid_file(
            self.code,
            self.file,
            Some(&format!("{}/{key}", self.at)),
            problem,
        )
    }

    /// A required string.
    pub fn string(&self, key: &str) -> Result<&'a str> {
        match self.map.get(key) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => {
                Err(self.err(key, format!("must be a string, not {}", json_kind(other))))
            }
            None => Err(self.err(key, "is required")),
        }
    }

    /// An optional string (absent or null is `None`).
    pub fn opt_string(&self, key: &str) -> Result<Option<&'a str>> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.err(
                key,
                format!("must be a string or null, not {}", json_kind(other)),
            )),
        }
    }

    /// A required string among `allowed`.
    pub fn one_of(&self, key: &str, allowed: &[&str]) -> Result<&'a str> {
        let s = self.string(key)?;
        if allowed.contains(&s) {
            Ok(s)
        } else {
            Err(self.err(
                key,
                format!("is {s:?}; expected one of: {}", allowed.join(", ")),
            ))
        }
    }

    /// An optional string among `allowed`.
    pub fn opt_one_of(&self, key: &str, allowed: &[&str]) -> Result<Option<&'a str>> {
        match self.opt_string(key)? {
            Some(s) if !allowed.contains(&s) => Err(self.err(
                key,
                format!("is {s:?}; expected one of: {}", allowed.join(", ")),
            )),
            other => Ok(other),
        }
    }

    /// An array (required or not), each item given with its pointer.
    pub fn array(&self, key: &str, required: bool) -> Result<Vec<(String, &'a Value)>> {
        match self.map.get(key) {
            Some(Value::Array(items)) => Ok(items
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("{}/{key}/{i}", self.at), v))
                .collect()),
            None | Some(Value::Null) if !required => Ok(Vec::new()),
            None => Err(self.err(key, "is required")),
            Some(other) => {
                Err(self.err(key, format!("must be an array, not {}", json_kind(other))))
            }
        }
    }

    /// An optional object.
    pub fn opt_object(&self, key: &str) -> Result<Option<Fields<'a>>> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Fields {
                map,
                at: format!("{}/{key}", self.at),
                file: self.file,
                code: self.code,
            })),
            Some(other) => {
                Err(self.err(key, format!("must be an object, not {}", json_kind(other))))
            }
        }
    }

    /// An item of an array, which must be an object.
    pub fn item(&self, at: String, value: &'a Value) -> Result<Fields<'a>> {
        match value {
            Value::Object(map) => Ok(Fields {
                map,
                at,
                file: self.file,
                code: self.code,
            }),
            other => Err(EpicError::invalid_file(
                self.code,
                self.file,
                Some(&at),
                format!("must be an object, not {}", json_kind(other)),
            )),
        }
    }

    /// An item of an array, which must be a string.
    pub fn string_item(&self, at: &str, value: &'a Value) -> Result<&'a str> {
        value.as_str().ok_or_else(|| {
            EpicError::invalid_file(
                self.code,
                self.file,
                Some(at),
                format!("must be a string, not {}", json_kind(value)),
            )
        })
    }

    /// An optional non-negative integer.
    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| self.err(key, "must be a non-negative integer")),
        }
    }
}
