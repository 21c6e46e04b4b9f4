//! The three mounts the model sees (`@project`, `@pkg`, `@state`) and how a model-supplied path
//! becomes a safe handle.
//!
//! Why capabilities and not a realpath check: a realpath check followed by `open(path)` has a
//! window in which a directory can be swapped for a symlink (TOCTOU), and the check must be
//! repeated for every parent of a new file. Each mount is instead opened once as a `cap_std`
//! directory handle, and every file operation goes *through* that handle with a relative path;
//! on Linux cap-std resolves it with `openat2(RESOLVE_BENEATH)` (component by component
//! elsewhere), so `..`, absolute paths and symlinks that lead outside fail inside the kernel at
//! the moment of the open, whatever happened before. String checks below reject the obvious
//! cases early, with a clear message, and keep absolute host paths out of every result.

use crate::result::ToolError;
use cap_std::fs::Dir;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mount {
    Project,
    Pkg,
    State,
}

impl Mount {
    pub fn alias(self) -> &'static str {
        match self {
            Mount::Project => "@project",
            Mount::Pkg => "@pkg",
            Mount::State => "@state",
        }
    }

    pub fn writable(self) -> bool {
        self != Mount::Pkg
    }
}

/// A path inside a mount, normalized: `rel` is empty for the mount root, else `a/b/c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountPath {
    pub mount: Mount,
    pub rel: String,
}

impl MountPath {
    /// The path as the model sees it: `@project/artifacts/x.md`.
    pub fn display(&self) -> String {
        if self.rel.is_empty() {
            self.mount.alias().to_string()
        } else {
            format!("{}/{}", self.mount.alias(), self.rel)
        }
    }

    /// `rel` as a path for cap-std (`.` for the root).
    pub fn rel_path(&self) -> &Path {
        if self.rel.is_empty() {
            Path::new(".")
        } else {
            Path::new(&self.rel)
        }
    }

    pub fn join(&self, name: &str) -> MountPath {
        MountPath {
            mount: self.mount,
            rel: if self.rel.is_empty() {
                name.to_string()
            } else {
                format!("{}/{name}", self.rel)
            },
        }
    }

    pub fn parent_rel(&self) -> &str {
        self.rel.rsplit_once('/').map(|(p, _)| p).unwrap_or("")
    }

    pub fn file_name(&self) -> &str {
        self.rel.rsplit('/').next().unwrap_or("")
    }

    /// True when a component is `.git`, in any case (case-insensitive file systems open
    /// `.GIT` as `.git`) and with the trailing dots or spaces Windows drops: the repository
    /// itself, a nested one, or a worktree's `.git` file.
    pub fn is_in_git_dir(&self) -> bool {
        self.rel
            .split('/')
            .any(|c| c.trim_end_matches(['.', ' ']).eq_ignore_ascii_case(".git"))
    }

    /// Inside `.workflow/.maestro/`, where lifecycle sessions keep status.json, decisions and
    /// their step-run links: files only the orchestrator writes (a step's model that could
    /// write them would mark its own session complete).
    pub fn is_in_session_files(&self) -> bool {
        let mut parts = self
            .rel
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .map(|c| c.trim_end_matches(['.', ' ']).to_ascii_lowercase());
        parts.next().as_deref() == Some(".workflow") && parts.next().as_deref() == Some(".maestro")
    }

    /// BMAD's configuration (`_bmad/**/config.*`, `.bmad/**/config.*`, `bmad/**/config.*`):
    /// it locates the orchestrators' files (`implementation_artifacts`, …), so a model that
    /// could write it would point the epic autopilot at a folder of its own.
    pub fn is_bmad_config(&self) -> bool {
        let parts: Vec<String> = self
            .rel
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .map(|c| c.trim_end_matches(['.', ' ']).to_ascii_lowercase())
            .collect();
        parts.len() >= 2
            && BMAD_DIRS.contains(&parts[0].as_str())
            && parts.last().is_some_and(|f| f.starts_with("config."))
    }
}

impl MountPath {
    /// Whether this path is one of `protected` (project-relative paths) or beneath one,
    /// compared by whole components, in any case and with the trailing dots or spaces Windows
    /// drops (so no spelling reaches the same file around the check).
    pub fn is_protected(&self, protected: &[String]) -> bool {
        let norm = |s: &str| -> Vec<String> {
            s.split('/')
                .filter(|c| !c.is_empty() && *c != ".")
                .map(|c| c.trim_end_matches(['.', ' ']).to_ascii_lowercase())
                .collect()
        };
        let parts = norm(&self.rel);
        protected.iter().any(|p| {
            let root = norm(p);
            !root.is_empty() && parts.len() >= root.len() && parts[..root.len()] == root[..]
        })
    }
}

/// The folders BMAD installs its modules (and their `config.yaml`) in.
pub const BMAD_DIRS: [&str; 3] = ["_bmad", ".bmad", "bmad"];

fn violation(raw: &str, reason: &str) -> ToolError {
    ToolError::sandbox(format!("Path not allowed: {}: {reason}", printable(raw)))
}

/// The raw path as shown back to the model: control characters escaped, never longer than 200.
pub fn printable(raw: &str) -> String {
    let mut s: String = raw.chars().take(200).flat_map(char::escape_debug).collect();
    if raw.chars().count() > 200 {
        s.push('…');
    }
    s
}

/// Parses a model-supplied path such as `@project/artifacts/x.md`.
///
/// Refused: a missing or unknown mount, NUL and other control characters, backslashes
/// (Windows separators would be plain characters on Unix and surprise everyone), absolute
/// paths, `..` segments, and percent-encoded or Unicode look-alike dots and slashes, which no
/// legitimate package path needs.
pub fn parse(raw: &str) -> Result<MountPath, ToolError> {
    if raw.chars().any(|c| c.is_control()) {
        return Err(violation(
            raw,
            "control characters (such as NUL) are not allowed in paths",
        ));
    }
    if raw.contains('\\') {
        return Err(violation(raw, "use '/' as the separator"));
    }
    if raw.contains('%') && has_encoded_separator(raw) {
        return Err(violation(
            raw,
            "percent-encoded dots and slashes are not allowed",
        ));
    }
    if raw.chars().any(is_lookalike) {
        return Err(violation(
            raw,
            "the path contains a Unicode look-alike of '.' or '/'",
        ));
    }
    let trimmed = raw.trim();
    let (mount, rest) = if let Some(rest) = strip_mount(trimmed, "@project") {
        (Mount::Project, rest)
    } else if let Some(rest) = strip_mount(trimmed, "@pkg") {
        (Mount::Pkg, rest)
    } else if let Some(rest) = strip_mount(trimmed, "@state") {
        (Mount::State, rest)
    } else if trimmed.starts_with('/')
        || trimmed.get(1..3) == Some(":/")
        || trimmed.starts_with('~')
    {
        return Err(violation(
            raw,
            "absolute paths are not allowed; use @project/, @pkg/ or @state/",
        ));
    } else if trimmed.starts_with('@') {
        return Err(violation(
            raw,
            "unknown mount; use @project/, @pkg/ or @state/",
        ));
    } else {
        return Err(violation(
            raw,
            "paths must start with @project/, @pkg/ or @state/",
        ));
    };
    let mut parts = Vec::new();
    for segment in rest.split('/') {
        match segment {
            "" | "." => continue,
            ".." => return Err(violation(raw, "'..' is not allowed")),
            s => parts.push(s),
        }
    }
    Ok(MountPath {
        mount,
        rel: parts.join("/"),
    })
}

fn strip_mount<'a>(path: &'a str, alias: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(alias)?;
    if rest.is_empty() {
        Some("")
    } else {
        rest.strip_prefix('/')
    }
}

fn has_encoded_separator(raw: &str) -> bool {
    let lower = raw.to_ascii_lowercase();
    ["%2e", "%2f", "%5c", "%00", "%25"]
        .iter()
        .any(|e| lower.contains(e))
}

/// Characters that render like `.` or `/` (fullwidth, one-dot leader, division slash, …).
fn is_lookalike(c: char) -> bool {
    matches!(
        c,
        '\u{2024}'
            | '\u{2025}'
            | '\u{FF0E}'
            | '\u{FE52}'
            | '\u{0701}'
            | '\u{0702}'
            | '\u{2215}'
            | '\u{2044}'
            | '\u{FF0F}'
            | '\u{29F8}'
            | '\u{1735}'
            | '\u{FE68}'
            | '\u{FF3C}'
            | '\u{2216}'
            | '\u{29F5}'
    )
}

/// The opened mounts of one run.
pub struct Mounts {
    project: Dir,
    pkg: Dir,
    state: Dir,
    /// Host paths are kept only for the search walker; they never reach a result.
    project_root: PathBuf,
    pkg_root: PathBuf,
    state_root: PathBuf,
}

impl Mounts {
    pub fn open(project: &Path, pkg: &Path, state: &Path) -> io::Result<Mounts> {
        let open = |p: &Path| Dir::open_ambient_dir(p, cap_std::ambient_authority());
        Ok(Mounts {
            project: open(project)?,
            pkg: open(pkg)?,
            state: open(state)?,
            project_root: std::fs::canonicalize(project)?,
            pkg_root: std::fs::canonicalize(pkg)?,
            state_root: std::fs::canonicalize(state)?,
        })
    }

    pub fn dir(&self, mount: Mount) -> &Dir {
        match mount {
            Mount::Project => &self.project,
            Mount::Pkg => &self.pkg,
            Mount::State => &self.state,
        }
    }

    /// `path` as it resolves in the project: links in the part that exists followed (within
    /// the project; a link out is refused when the file is opened). `None` when nothing of it
    /// is a link, or it is not in the project. A write is checked under both names, so a link
    /// the model made (`g -> .git`) cannot carry it where its own name may not go.
    pub(crate) fn real_project_path(&self, path: &MountPath) -> Option<MountPath> {
        if path.mount != Mount::Project || path.rel.is_empty() {
            return None;
        }
        let root = &self.project_root;
        let mut existing = root.join(&path.rel);
        let mut rest: Vec<std::ffi::OsString> = Vec::new();
        while existing.symlink_metadata().is_err() {
            rest.push(existing.file_name()?.to_os_string());
            existing.pop();
            if !existing.starts_with(root) {
                return None;
            }
        }
        let mut real = existing.canonicalize().ok()?;
        for part in rest.iter().rev() {
            real.push(part);
        }
        let rel = real.strip_prefix(root).ok()?.to_string_lossy().into_owned();
        (rel != path.rel).then_some(MountPath {
            mount: Mount::Project,
            rel,
        })
    }

    pub(crate) fn host_root(&self, mount: Mount) -> &Path {
        match mount {
            Mount::Project => &self.project_root,
            Mount::Pkg => &self.pkg_root,
            Mount::State => &self.state_root,
        }
    }
}

/// Maps an I/O error on `path` to a tool error that names only the mount path.
pub fn io_error(path: &MountPath, e: &io::Error) -> ToolError {
    let shown = path.display();
    match e.kind() {
        io::ErrorKind::NotFound => ToolError::new("ENOENT", format!("File not found: {shown}")),
        io::ErrorKind::PermissionDenied if e.to_string().contains("outside") => ToolError::sandbox(
            format!("Path not allowed: {shown} resolves outside its mount (through a symlink)"),
        ),
        io::ErrorKind::PermissionDenied => {
            ToolError::new("EACCES", format!("Permission denied: {shown}"))
        }
        io::ErrorKind::NotADirectory => {
            ToolError::new("ENOTDIR", format!("Not a directory: {shown}"))
        }
        io::ErrorKind::IsADirectory => ToolError::new("EISDIR", format!("Is a directory: {shown}")),
        io::ErrorKind::AlreadyExists => {
            ToolError::new("EEXIST", format!("Already exists: {shown}"))
        }
        _ => match e.raw_os_error() {
            // ELOOP: a symlink where none may be followed (O_NOFOLLOW, RESOLVE_NO_SYMLINKS).
            Some(40) | Some(62) => {
                ToolError::sandbox(format!("Path not allowed: {shown} is a symlink"))
            }
            // EXDEV: RESOLVE_BENEATH refused to leave the mount.
            Some(18) => ToolError::sandbox(format!(
                "Path not allowed: {shown} resolves outside its mount"
            )),
            _ => ToolError::new("E_INTERNAL", format!("I/O error on {shown}: {e}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mount_paths() {
        assert_eq!(parse("@project").unwrap().rel, "");
        assert_eq!(parse("@project/").unwrap().rel, "");
        let p = parse("@project/./artifacts//x.md").unwrap();
        assert_eq!(
            (p.mount, p.rel.as_str()),
            (Mount::Project, "artifacts/x.md")
        );
        assert_eq!(p.display(), "@project/artifacts/x.md");
        assert_eq!(parse("@state/workflow.md").unwrap().mount, Mount::State);
        assert_eq!(parse("@pkg/steps/a.md").unwrap().mount, Mount::Pkg);
    }

    #[test]
    fn git_components_in_any_spelling() {
        for raw in [
            "@project/.git",
            "@project/.git/hooks/pre-commit",
            "@project/.GIT/config",
            "@project/.Git/HEAD",
            "@project/vendor/lib/.git/hooks/post-checkout",
            "@project/.git./hooks/x",
            "@project/.git /hooks/x",
        ] {
            assert!(parse(raw).unwrap().is_in_git_dir(), "{raw}");
        }
        for raw in [
            "@project/.gitignore",
            "@project/.github/workflows/ci.yml",
            "@project/x.git/y",
            "@project/git/hooks",
            "@project/.gitkeep",
            "@project",
        ] {
            assert!(!parse(raw).unwrap().is_in_git_dir(), "{raw}");
        }
    }

    #[test]
    fn bmad_configuration_in_any_spelling() {
        for raw in [
            "@project/_bmad/bmm/config.yaml",
            "@project/_BMAD/bmm/Config.YAML",
            "@project/.bmad/core/config.yml",
            "@project/bmad/bmm/deep/config.json",
            "@project/_bmad./bmm/config.yaml",
            "@project/_bmad/config.yaml",
        ] {
            assert!(parse(raw).unwrap().is_bmad_config(), "{raw}");
        }
        for raw in [
            "@project/_bmad/bmm/workflows/x.md",
            "@project/_bmad-output/config.yaml",
            "@project/src/_bmad/config.yaml",
            "@project/config.yaml",
            "@state/_bmad/bmm/config.yaml",
        ] {
            let p = parse(raw).unwrap();
            assert!(p.mount != Mount::Project || !p.is_bmad_config(), "{raw}");
        }
    }

    #[test]
    fn protected_paths_in_any_spelling() {
        let protected = vec![".claude/skills".to_string(), "_bmad/custom".to_string()];
        for raw in [
            "@project/.claude/skills/bmad-code-review/SKILL.md",
            "@project/.Claude/Skills./x",
            "@project/_bmad/custom/bmad-code-review.toml",
            "@project/./_bmad/custom",
        ] {
            assert!(parse(raw).unwrap().is_protected(&protected), "{raw}");
        }
        for raw in [
            "@project/.claude/settings.json",
            "@project/_bmad/customer.toml",
            "@project/src/.claude/skills/x",
        ] {
            assert!(!parse(raw).unwrap().is_protected(&protected), "{raw}");
        }
        assert!(!parse("@project/x").unwrap().is_protected(&[]));
    }

    #[test]
    fn refuses_hostile_spellings() {
        for raw in [
            "@project/../x",
            "@project/a/../../x",
            "/etc/passwd",
            "C:/Windows",
            "C:\\Windows",
            "~/x",
            "@projects/x",
            "@foo/x",
            "project/x",
            "@project/a\0b",
            "@project/%2e%2e/x",
            "@project/\u{FF0E}\u{FF0E}/x",
            "@project/a\u{2215}b",
            "@project\\..\\x",
            "",
        ] {
            let err = parse(raw).unwrap_err();
            assert_eq!(err.code, "E_SANDBOX_VIOLATION", "{raw:?}");
            assert!(!err.message.contains('\0'));
        }
    }
}
