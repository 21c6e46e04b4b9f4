//! `fs.read` and `fs.list`.

use crate::files::open_regular;
use crate::mounts::{MountPath, Mounts, io_error};
use crate::policy::LIST_LIMIT;
use crate::result::{ToolError, ok};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader};

const TOO_LARGE_HINT: &str = "File too large. Use fs.search to locate relevant sections, then fs.read({startLine,endLine}) to fetch a small window.";

/// Reads a file (or a window of lines), hashing all of it as it streams by.
pub fn read(
    mounts: &Mounts,
    path: &MountPath,
    start: Option<u64>,
    end: Option<u64>,
    max: u64,
) -> Result<Value, ToolError> {
    if let (Some(s), Some(e)) = (start, end)
        && e < s
    {
        return Err(ToolError::invalid_args(format!(
            "endLine ({e}) is before startLine ({s})"
        )));
    }
    let (file, size) = open_regular(mounts, path)?;
    let windowed = start.is_some() || end.is_some();
    let first = start.unwrap_or(1);
    let last = end.unwrap_or(u64::MAX);
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut hasher = Sha256::new();
    let mut kept: Vec<u8> = Vec::new();
    let mut truncated = false;
    let mut line_no = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_error(path, &e))?;
        if n == 0 {
            break;
        }
        hasher.update(&line);
        line_no += 1;
        if line_no < first || line_no > last || truncated {
            continue;
        }
        if (kept.len() + line.len()) as u64 > max {
            let room = (max as usize).saturating_sub(kept.len());
            kept.extend_from_slice(&line[..room]);
            truncated = true;
        } else {
            kept.extend_from_slice(&line);
        }
    }
    let sha256 = hex(&hasher.finalize());
    if kept.contains(&0) {
        return Err(ToolError::new(
            "E_BINARY_FILE",
            format!("{} is a binary file", path.display()),
        )
        .with_details(json!({"bytes": size, "sha256": sha256})));
    }
    // Never cut a UTF-8 character in half.
    let text = match String::from_utf8(kept) {
        Ok(t) => t,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let bytes = e.into_bytes();
            if truncated && bytes.len() - valid < 4 {
                String::from_utf8_lossy(&bytes[..valid]).into_owned()
            } else {
                String::from_utf8_lossy(&bytes).into_owned()
            }
        }
    };
    let mut out =
        json!({"path": path.display(), "bytes": size, "sha256": sha256, "truncated": truncated});
    if windowed {
        out["startLine"] = json!(first);
        out["endLine"] = json!(last.min(line_no.max(first)));
        out["totalLines"] = json!(line_no);
    }
    if truncated {
        out["contentPreview"] = json!(text);
        out["hint"] = json!(TOO_LARGE_HINT);
    } else {
        out["content"] = json!(text);
    }
    Ok(ok(out))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lists a directory: sorted, directories with a trailing `/`, hidden entries and symlinks
/// skipped, at most [`LIST_LIMIT`] names.
pub fn list(mounts: &Mounts, path: &MountPath) -> Result<Value, ToolError> {
    let dir = mounts.dir(path.mount);
    let entries = dir
        .read_dir(path.rel_path())
        .map_err(|e| io_error(path, &e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(path, &e))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_symlink() {
            continue;
        }
        names.push(if ft.is_dir() {
            format!("{name}/")
        } else {
            name
        });
    }
    names.sort();
    let total = names.len();
    if total > LIST_LIMIT {
        names.truncate(LIST_LIMIT);
        return Ok(ok(json!({
            "path": path.display(), "entriesPreview": names, "truncated": true, "total": total,
            "hint": "Directory too large. Use fs.search, or list a subdirectory."
        })));
    }
    Ok(ok(json!({"path": path.display(), "entries": names})))
}
