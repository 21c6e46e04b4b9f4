//! Finding the session a verb works on: `--session <folder>` (a folder name only, never a
//! path), else the newest `running`/`paused` `ralph-*`/`maestro-*` session under
//! `.workflow/.maestro/` (newest = directory mtime, as maestro's CLI ranks them).
//!
//! A damaged status.json met on the way is reported (E010), never skipped: it may be the very
//! session the caller meant, half-written.

use super::context::Context;
use super::error::{RalphError, Result};
use super::schema::{self, SchemaIssue};
use super::session::{STATUS_FILE, Session};
use serde_json::Value;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A status.json this large is not a session; refuse before reading it into memory.
pub const MAX_STATUS_BYTES: u64 = 64 * 1024 * 1024;

const PREFIXES: [&str; 2] = ["ralph-", "maestro-"];

/// Which session a verb wants when none is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// The newest running or paused session (verbs that change a session).
    Active,
    /// The newest running or paused session, else the newest session of any status
    /// (verbs that only read).
    Any,
}

/// A session folder and what its status.json held: the document, or the problems that make it
/// unusable.
#[derive(Debug)]
pub struct Loaded {
    pub id: String,
    pub dir: PathBuf,
    pub raw: Option<Value>,
    pub issues: Vec<SchemaIssue>,
}

impl Loaded {
    pub fn into_session(self) -> Result<Session> {
        if !self.issues.is_empty() {
            return Err(RalphError::Corrupt {
                path: self.dir.join(STATUS_FILE),
                session: self.id,
                issues: self.issues,
            });
        }
        match self.raw {
            Some(Value::Object(doc)) => Ok(Session {
                id: self.id,
                dir: self.dir,
                doc,
            }),
            _ => Err(RalphError::Corrupt {
                path: self.dir.join(STATUS_FILE),
                session: self.id,
                issues: Vec::new(),
            }),
        }
    }

    fn status(&self) -> Option<&str> {
        self.raw.as_ref()?.get("status")?.as_str()
    }
}

/// A session id is a single folder name: no separators, no `.`/`..`, nothing a path could
/// escape with.
pub fn check_session_id(id: &str) -> Result<()> {
    let bad = id.is_empty()
        || id == "."
        || id == ".."
        || id.len() > 255
        || id.chars().any(|c| c == '/' || c == '\\' || c.is_control())
        || Path::new(id).is_absolute();
    if bad {
        return Err(RalphError::SessionIdInvalid(id.to_string()));
    }
    Ok(())
}

/// The named session, or the one [`Pick`] selects.
pub fn find(ctx: &Context, session: Option<&str>, pick: Pick) -> Result<Loaded> {
    let root = ctx.sessions_root();
    if let Some(id) = session {
        check_session_id(id)?;
        let dir = root.join(id);
        if !dir.join(STATUS_FILE).is_file() {
            return Err(RalphError::SessionNotFound(id.to_string()));
        }
        return Ok(load(id, &dir));
    }
    let mut fallback = None;
    for (id, dir) in candidates(&root) {
        if !dir.join(STATUS_FILE).is_file() {
            continue;
        }
        let loaded = load(&id, &dir);
        if !loaded.issues.is_empty() {
            return Ok(loaded);
        }
        if matches!(loaded.status(), Some("running" | "paused")) {
            return Ok(loaded);
        }
        if pick == Pick::Any && fallback.is_none() {
            fallback = Some(loaded);
        }
    }
    fallback.ok_or(match pick {
        Pick::Active => RalphError::NoActiveSession,
        Pick::Any => RalphError::NoSession,
    })
}

/// Loads and validates a session's status.json; problems are returned, not raised.
pub fn load(id: &str, dir: &Path) -> Loaded {
    let path = dir.join(STATUS_FILE);
    let (raw, issues) = match read_capped(&path) {
        Ok(bytes) => match schema::parse(&bytes) {
            Ok(doc) => (Some(doc), Vec::new()),
            Err(issues) => {
                let raw = serde_json::from_slice(&bytes).ok();
                (raw, issues)
            }
        },
        Err(message) => (
            None,
            vec![SchemaIssue {
                at: "$".into(),
                step_index: None,
                message,
            }],
        ),
    };
    Loaded {
        id: id.to_string(),
        dir: dir.to_path_buf(),
        raw,
        issues,
    }
}

fn read_capped(path: &Path) -> std::result::Result<Vec<u8>, String> {
    let file = baton_autopilot::untrusted::open_nonblocking(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() > MAX_STATUS_BYTES {
        return Err(format!(
            "the file is {} bytes, over the {MAX_STATUS_BYTES}-byte limit",
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_STATUS_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(bytes)
}

/// Session folders, newest first (directory mtime; ties by name, newest id first).
pub fn candidates(root: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    let mut found: Vec<(SystemTime, String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if !PREFIXES.iter().any(|p| name.starts_with(p)) {
                return None;
            }
            let path = e.path();
            let meta = fs::metadata(&path).ok()?;
            meta.is_dir().then(|| {
                (
                    meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    name,
                    path,
                )
            })
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    found.into_iter().map(|(_, n, p)| (n, p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_folder_names() {
        for bad in ["", ".", "..", "../x", "a/b", "a\\b", "/etc", "x\n"] {
            assert!(check_session_id(bad).is_err(), "{bad:?}");
        }
        check_session_id("ralph-20260524-101500").unwrap();
        check_session_id("my session").unwrap();
    }
}
