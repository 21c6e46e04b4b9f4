//! Reads an installed BMAD method beneath one root (the project): every file bounded, no link
//! followed out of the root, a FIFO or a device refused with its place named. What a skill
//! folder holds was written by an installer, or by a person, or by a phase's model: nothing in
//! it is trusted.

use crate::error::{BmadError, Result};
use baton_autopilot::untrusted::{self, UntrustedError};
use cap_std::fs::Dir;
use std::path::Path;

/// Largest text file of a skill or workflow read.
pub const MAX_FILE: u64 = 1 << 20;
/// Most files of one skill copied into its snapshot.
pub const MAX_FILES: usize = 300;
/// Most bytes of one skill's snapshot.
pub const MAX_TOTAL: u64 = 8 << 20;
/// Deepest folder of a skill looked into.
const MAX_DEPTH: usize = 5;

pub struct Reader {
    root: Dir,
}

fn refused(rel: &str, e: &UntrustedError) -> BmadError {
    BmadError::usage(e.code(), format!("{rel}: {e}")).hint(
        "the installed BMAD method is read from the project's files; restore or remove that file",
    )
}

impl Reader {
    pub fn open(root: &Path) -> Result<Reader> {
        let root = untrusted::open_root(root).map_err(|e| BmadError::io("open", root)(e))?;
        Ok(Reader { root })
    }

    /// `rel`'s bytes, when it is a regular file of at most `limit` bytes.
    pub fn bytes(&self, rel: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        untrusted::read_in(&self.root, Path::new(rel), limit).map_err(|e| refused(rel, &e))
    }

    /// `rel` as text (lossy UTF-8, without a BOM).
    pub fn text(&self, rel: &str) -> Result<Option<String>> {
        Ok(self.bytes(rel, MAX_FILE)?.map(|b| {
            let b = b.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&b);
            String::from_utf8_lossy(b).into_owned()
        }))
    }

    /// Whether `rel` is a regular file (a link is not followed).
    pub fn is_file(&self, rel: &str) -> bool {
        untrusted::kind_in(&self.root, Path::new(rel))
            .ok()
            .flatten()
            .is_some_and(|m| m.is_file())
    }

    /// Whether `rel` is a folder reached without leaving the root.
    pub fn is_dir(&self, rel: &str) -> bool {
        matches!(
            untrusted::open_dir_in(&self.root, Path::new(rel)),
            Ok(Some(_))
        )
    }

    /// The regular files under folder `rel` (paths relative to it, `/`-separated, sorted),
    /// at most [`MAX_FILES`], [`MAX_DEPTH`] folders deep; links and hidden names are skipped.
    pub fn files(&self, rel: &str) -> Vec<String> {
        let Ok(Some(dir)) = untrusted::open_dir_in(&self.root, Path::new(rel)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        walk(&dir, "", 0, &mut out);
        out.sort();
        out
    }

    /// The folders directly in `rel` (names, sorted), at most 1000.
    pub fn dirs(&self, rel: &str) -> Vec<String> {
        let Ok(Some(dir)) = untrusted::open_dir_in(&self.root, Path::new(rel)) else {
            return Vec::new();
        };
        let Ok(entries) = dir.entries() else {
            return Vec::new();
        };
        let mut out: Vec<String> = entries
            .flatten()
            .take(1000)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        out.sort();
        out
    }
}

fn walk(dir: &Dir, prefix: &str, depth: usize, out: &mut Vec<String>) {
    let Ok(entries) = dir.entries() else {
        return;
    };
    for e in entries.flatten().take(MAX_FILES * 4) {
        if out.len() >= MAX_FILES {
            return;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "__pycache__" {
            continue;
        }
        let Ok(kind) = e.file_type() else {
            continue;
        };
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        if kind.is_file() {
            out.push(rel);
        } else if kind.is_dir()
            && depth < MAX_DEPTH
            && let Ok(sub) = dir.open_dir(&name)
        {
            walk(&sub, &rel, depth + 1, out);
        }
    }
}

/// `a/b` joined, either side possibly empty.
pub fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{}/{}", a.trim_end_matches('/'), b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_files_without_links_and_hidden_names() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("s/steps")).unwrap();
        std::fs::write(root.join("s/SKILL.md"), "x").unwrap();
        std::fs::write(root.join("s/steps/a.md"), "y").unwrap();
        std::fs::write(root.join("s/.hidden"), "z").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("s/link.md")).unwrap();
        let r = Reader::open(root).unwrap();
        assert_eq!(r.files("s"), vec!["SKILL.md", "steps/a.md"]);
        assert!(r.is_file("s/SKILL.md"));
        assert!(!r.is_file("s/link.md"));
        assert_eq!(
            r.text("s/link.md").unwrap_err().code,
            "PATH_OUTSIDE_PROJECT"
        );
        assert_eq!(r.dirs("s"), vec!["steps"]);
        assert_eq!(join("a/", "b"), "a/b");
    }
}
