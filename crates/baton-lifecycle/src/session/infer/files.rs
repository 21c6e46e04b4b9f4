//! Bounded, located reads of the project's workflow files: a file over its limit, invalid
//! JSON, or an artifact path that leaves `.workflow/` is an error naming the file, never a
//! panic or an unbounded read.

use super::error::{InferError, Result};
use serde_json::Value;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// state.json: a registry of many thousand artifacts fits well below this.
pub const MAX_STATE_BYTES: u64 = 8 * 1024 * 1024;
/// A gate result file (verification.json, review.json, uat.md, conclusions.json).
pub const MAX_RESULT_BYTES: u64 = 1024 * 1024;

/// The file's text, `None` when it does not exist. Reads at most `limit` bytes (a file that
/// grows while read is still refused).
pub fn read_text(path: &Path, limit: u64) -> Result<Option<String>> {
    let io = |source| InferError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = match baton_autopilot::untrusted::open_nonblocking(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(InferError::field(path, "(file)", "not a regular file"));
    }
    if meta.len() > limit {
        return Err(InferError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            limit,
        });
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(InferError::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            limit,
        });
    }
    String::from_utf8(bytes).map(Some).map_err(|e| {
        InferError::field(
            path,
            "(file)",
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// The file parsed as JSON, `None` when it does not exist.
pub fn read_json(path: &Path, limit: u64) -> Result<Option<Value>> {
    let Some(text) = read_text(path, limit)? else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| InferError::Json {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })
}

/// Whether `rel` is a plain relative path (no root, no `..`, no drive prefix).
pub fn is_plain_relative(rel: &str) -> bool {
    let p = Path::new(rel);
    !rel.is_empty()
        && !rel.contains('\0')
        && p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// `workflow/rel` when it stays inside `workflow` after resolving symlinks; `None` when it
/// does not exist. `source` and `field` locate the registry entry in an error.
pub fn resolve_inside(
    workflow: &Path,
    rel: &str,
    source: &Path,
    field: &str,
) -> Result<Option<PathBuf>> {
    let outside = || InferError::PathOutside {
        path: source.to_path_buf(),
        field: field.to_string(),
        value: rel.to_string(),
    };
    if !is_plain_relative(rel) {
        return Err(outside());
    }
    let joined = workflow.join(rel);
    let real = match joined.canonicalize() {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(InferError::Io {
                path: joined,
                source: e,
            });
        }
    };
    let root = workflow.canonicalize().map_err(|e| InferError::Io {
        path: workflow.to_path_buf(),
        source: e,
    })?;
    if real.starts_with(&root) {
        Ok(Some(real))
    } else {
        Err(outside())
    }
}
