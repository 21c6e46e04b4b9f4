//! Finding the session a verb works on: `--session <folder>` (a folder name only, never a
//! path), else the newest `running`/`paused` `ralph-*`/`maestro-*` session under
//! `.workflow/.maestro/` (newest = directory mtime, as maestro's CLI ranks them).
//!
//! A damaged status.json met on the way is skipped with a warning, as maestro skips it: the
//! damage stays in its folder (`--session <that folder>` reports it, E010). Writes are atomic
//! renames, so a status.json is never seen half-written by a ralph verb.

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
///
/// Without a name, a folder whose status.json is damaged is skipped with a warning (as
/// maestro skips a file that does not parse), so one broken folder never stops the sessions
/// beside it; `--session` names it to see its problems. A damaged file that still parses and
/// says `running` or `paused` is the session meant, and is returned with its problems. When
/// every candidate is damaged, the newest damaged one is returned (its E010 says more than
/// "no session").
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
    let mut damaged: Vec<Loaded> = Vec::new();
    for (id, dir) in candidates(&root) {
        if !dir.join(STATUS_FILE).is_file() {
            continue;
        }
        let loaded = load(&id, &dir);
        let active = matches!(loaded.status(), Some("running" | "paused"));
        // A file that parses and says it is running is the session meant, damaged or not:
        // its problems are reported. Anything else damaged is passed over.
        if !loaded.issues.is_empty() && !active {
            damaged.push(loaded);
            continue;
        }
        if active {
            warn_skipped(ctx, &damaged);
            return Ok(loaded);
        }
        if pick == Pick::Any && fallback.is_none() {
            fallback = Some(loaded);
        }
    }
    if let Some(found) = fallback {
        warn_skipped(ctx, &damaged);
        return Ok(found);
    }
    if !damaged.is_empty() {
        return Ok(damaged.swap_remove(0));
    }
    Err(match pick {
        Pick::Active => RalphError::NoActiveSession,
        Pick::Any => RalphError::NoSession,
    })
}

/// One warning per damaged folder passed over on the way to the session used.
fn warn_skipped(ctx: &Context, damaged: &[Loaded]) {
    for d in damaged {
        let first = d
            .issues
            .first()
            .map_or_else(|| "unknown problem".to_string(), SchemaIssue::located);
        ctx.warnings.push(format!(
            "skipped session {}: its status.json is damaged ({first}); `{} check --session {}` lists its problems",
            d.id, ctx.cli, d.id
        ));
    }
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
