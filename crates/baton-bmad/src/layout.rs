//! Where a project keeps its implementation artifacts (`sprint-status.yaml`, story files and the
//! autopilot's files): `[autopilot] implementation_artifacts` in `baton.toml`, else what BMAD's
//! configuration of any generation names (see [`super::bmad_config`]) when that folder holds a
//! `sprint-status.yaml`, else the folder where BMAD projects keep one ([`SEARCHED`]). The layout
//! says which rule chose the folder, which rules fell through and why, and which other
//! `sprint-status.yaml` files the rules lead to ([`Source`]).

use super::error::{BmadError, Result, refused};
use baton_autopilot::untrusted::{self, UntrustedError};
use cap_std::fs::Dir;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file a layout is found by: BMAD's sprint status.
pub const SPRINT_STATUS: &str = "sprint-status.yaml";

pub const DEFAULT_DIR: &str = "_bmad-output/implementation-artifacts";
pub const BMM_CONFIG: &str = "_bmad/bmm/config.yaml";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub project: PathBuf,
    /// The artifacts folder: its path, and the folder itself opened through the project (see
    /// [`Artifacts`]).
    pub dir: Artifacts,
    /// The same, relative to the project, with `/` separators (what phases and messages see).
    pub rel: String,
    /// Where the folder's name came from (for messages): the rule of [`Source::rule`].
    pub from: String,
    /// How the folder was found, and what else was found.
    pub source: Source,
}

/// How the artifacts folder was found: the rule that chose it, the rules before it that did not
/// (and why), the other `sprint-status.yaml` files the rules lead to, and the configured story
/// folders (`dev_story_location`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Source {
    /// e.g. `_bmad/custom/config.toml [modules.bmm] implementation_artifacts`, `search:
    /// docs/sprint-artifacts`, `the default`.
    pub rule: String,
    /// Rules passed over, one sentence each (a configured folder without the file, a value
    /// outside the project).
    pub notes: Vec<String>,
    /// Other `sprint-status.yaml` files found; not used.
    pub others: Vec<OtherFile>,
    /// `dev_story_location` settings of BMAD's configuration.
    pub story_dirs: Vec<super::bmad_config::Setting>,
}

/// Which `sprint-status.yaml` a command reads and why, as `baton epic status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SprintStatusInfo {
    /// Project-relative.
    pub path: String,
    /// The rule that chose it (see [`Source::rule`]).
    pub rule: String,
    /// Whether it exists.
    pub exists: bool,
    /// Rules passed over, and why.
    pub notes: Vec<String>,
    /// Other `sprint-status.yaml` files found, not used.
    pub others: Vec<OtherFile>,
}

/// A `sprint-status.yaml` the rules lead to besides the one used.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OtherFile {
    /// Project-relative.
    pub path: String,
    pub rule: String,
}

/// The artifacts folder, opened once beneath the project root when the layout is resolved:
/// every read and write of the orchestrator goes through this handle, so a folder replaced by
/// a symlink to outside the project (before: refused at the open; after: the handle still
/// names the folder that was resolved) is never followed. It derefs to the folder's path for
/// messages and for what needs a path (the phases' variables).
#[derive(Clone)]
pub struct Artifacts {
    path: PathBuf,
    rel: String,
    /// `None`: the folder did not exist when the layout was resolved.
    cap: Option<Arc<Dir>>,
    project: Arc<Dir>,
}

impl std::fmt::Debug for Artifacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Artifacts").field(&self.path).finish()
    }
}

impl PartialEq for Artifacts {
    fn eq(&self, other: &Artifacts) -> bool {
        self.path == other.path
    }
}

impl Eq for Artifacts {}

impl std::ops::Deref for Artifacts {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for Artifacts {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

/// One file of the artifacts folder (a name directly in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactFile {
    pub dir: Artifacts,
    pub name: String,
}

impl ArtifactFile {
    fn shown(&self) -> String {
        if self.dir.rel.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.dir.rel, self.name)
        }
    }

    pub fn read(&self, limit: u64) -> Result<Option<Vec<u8>>> {
        self.dir.read(&self.name, limit)
    }

    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        self.dir.write(&self.name, bytes)
    }

    pub fn remove(&self) -> Result<()> {
        self.dir.remove(&self.name)
    }

    /// The size of the file when it is a regular file (a link, a FIFO: `None`).
    pub fn regular_len(&self) -> Option<u64> {
        let cap = self.dir.cap.as_ref()?;
        let meta = untrusted::kind_in(cap, Path::new(&self.name)).ok()??;
        meta.is_file().then(|| meta.len())
    }

    /// When the file was last changed (`None`: missing, or not a regular file).
    pub fn modified(&self) -> Option<std::time::SystemTime> {
        let cap = self.dir.cap.as_ref()?;
        let meta = untrusted::kind_in(cap, Path::new(&self.name)).ok()??;
        if !meta.is_file() {
            return None;
        }
        meta.modified().ok().map(|t| t.into_std())
    }

    pub fn exists(&self) -> bool {
        self.dir.cap.as_ref().is_some_and(|c| {
            untrusted::kind_in(c, Path::new(&self.name)).is_ok_and(|m| m.is_some())
        })
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path.join(&self.name)
    }

    /// The error of a refused file, located.
    pub fn refused(&self, e: &UntrustedError) -> BmadError {
        refused(&self.shown(), e)
    }
}

impl Artifacts {
    fn open(project: &Path, rel: &str, from: &str, value: &str) -> Result<Artifacts> {
        let root = untrusted::open_root(project).map_err(|e| BmadError::io("open", project)(e))?;
        let cap = untrusted::open_dir_in(&root, Path::new(rel)).map_err(|e| match e {
            UntrustedError::Outside => layout_error(format!(
                "{from} ({value}) leads outside the project (through a symlink)"
            )),
            UntrustedError::NotRegular(_) => {
                layout_error(format!("{from} ({value}) is not a folder"))
            }
            e => refused(rel, &e),
        })?;
        Ok(Artifacts {
            path: project.join(rel),
            rel: rel.to_string(),
            cap: cap.map(Arc::new),
            project: Arc::new(root),
        })
    }

    /// Whether `name` is in the folder (as anything: a file of the wrong kind is refused when
    /// it is read, not passed over).
    pub fn has(&self, name: &str) -> bool {
        self.cap
            .as_deref()
            .is_some_and(|c| untrusted::kind_in(c, Path::new(name)).is_ok_and(|m| m.is_some()))
    }

    /// A file anywhere in the project (`rel`: project-relative, `/` separators) read through
    /// the project's handle, bounded; a link out of the project is refused. `None`: missing.
    pub fn read_project_file(&self, rel: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        untrusted::read_in(&self.project, Path::new(rel), limit).map_err(|e| refused(rel, &e))
    }

    /// The size of a project file when it is a regular file (a link, a FIFO, missing: `None`).
    pub fn project_file_len(&self, rel: &str) -> Option<u64> {
        let meta = untrusted::kind_in(&self.project, Path::new(rel)).ok()??;
        meta.is_file().then(|| meta.len())
    }

    /// A folder of the project (`rel`: project-relative), opened beneath it; `None`: missing,
    /// not a folder, or leading outside.
    pub fn project_dir(&self, rel: &str) -> Option<Dir> {
        untrusted::open_dir_in(&self.project, Path::new(rel))
            .ok()
            .flatten()
    }

    /// Whether the folder existed when the layout was resolved.
    pub fn is_open(&self) -> bool {
        self.cap.is_some()
    }

    fn cap(&self) -> Result<&Dir> {
        self.cap.as_deref().ok_or_else(|| {
            BmadError::usage(
                "SPRINT_STATUS_MISSING",
                format!("the folder {} does not exist", self.rel),
            )
        })
    }

    fn shown(&self, name: &str) -> String {
        if self.rel.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.rel)
        }
    }

    /// `name` read through the folder's handle (see [`untrusted::read_in`]); `None` when missing.
    pub fn read(&self, name: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let Some(cap) = self.cap.as_deref() else {
            return Ok(None);
        };
        untrusted::read_in(cap, Path::new(name), limit).map_err(|e| refused(&self.shown(name), &e))
    }

    /// `name` replaced durably through the folder's handle.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        untrusted::write_in(self.cap()?, name, bytes).map_err(|e| refused(&self.shown(name), &e))
    }

    /// `name` removed (a missing file is fine).
    pub fn remove(&self, name: &str) -> Result<()> {
        untrusted::remove_in(self.cap()?, name).map_err(|e| refused(&self.shown(name), &e))
    }

    pub fn file(&self, name: &str) -> ArtifactFile {
        ArtifactFile {
            dir: self.clone(),
            name: name.to_string(),
        }
    }

    /// The names in the folder, at most `max`.
    pub fn names(&self, max: usize) -> Vec<String> {
        let Some(cap) = self.cap.as_deref() else {
            return Vec::new();
        };
        cap.entries()
            .map(|d| {
                d.flatten()
                    .take(max)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The folder as an ordinary descriptor, for `flock`.
    pub fn lock_handle(&self) -> Result<std::fs::File> {
        untrusted::open_self(self.cap()?).map_err(|e| BmadError::io("open", &self.path)(e))
    }

    /// Whether the folder's path still leads to the folder that was resolved: a phase's model
    /// that moved it away, or replaced it by a link, is reported, never followed.
    pub fn still_resolved(&self) -> Result<()> {
        let Some(cap) = self.cap.as_deref() else {
            return Ok(());
        };
        let moved = || {
            BmadError::failure(
                "EPIC_LAYOUT_CHANGED",
                format!(
                    "the implementation artifacts folder {} was moved or replaced during the epic; baton keeps working in the folder it resolved and does not follow it",
                    self.rel
                ),
            )
            .hint("a phase's model may have moved it: put the folder back, then `baton epic resume`")
        };
        let now =
            untrusted::open_dir_in(&self.project, Path::new(&self.rel)).map_err(|_| moved())?;
        let Some(now) = now else {
            return Err(moved());
        };
        match (untrusted::identity(cap), untrusted::identity(&now)) {
            (Ok(a), Ok(b)) if a == b => Ok(()),
            _ => Err(moved()),
        }
    }
}

impl Layout {
    /// The layout is still the one resolved when the command started: the configuration names
    /// the same folder, and the folder's path still leads to the folder opened then. A change
    /// (a phase's model that edited `_bmad/bmm/config.yaml` or `baton.toml`, or moved the
    /// folder) stops the loop; it is never followed. `configured` reads baton's own setting of
    /// the folder again (`[autopilot] implementation_artifacts`).
    pub fn recheck(&self, configured: impl FnOnce(&Path) -> Result<Option<String>>) -> Result<()> {
        let changed = |e: BmadError| {
            BmadError::failure(
                "EPIC_LAYOUT_CHANGED",
                format!("during the epic: {}", e.message),
            )
            .hint("a phase's model may have changed it: restore it, then `baton epic resume`")
        };
        let configured = configured(&self.project).map_err(changed)?;
        let again = resolve(&self.project, configured.as_deref()).map_err(changed)?;
        if again.rel != self.rel {
            return Err(BmadError::failure(
                "EPIC_LAYOUT_CHANGED",
                format!(
                    "{} was changed during the epic to name {:?}; the epic works in {:?} and does not follow the change",
                    again.from, again.rel, self.rel
                ),
            )
            .hint("a phase's model may have changed it: restore the setting, then `baton epic resume`"));
        }
        self.dir.still_resolved()
    }

    /// Which `sprint-status.yaml` this layout reads, and why.
    pub fn sprint_status_info(&self) -> SprintStatusInfo {
        SprintStatusInfo {
            path: self.rel_file(SPRINT_STATUS),
            rule: self.source.rule.clone(),
            exists: self.dir.has(SPRINT_STATUS),
            notes: self.source.notes.clone(),
            others: self.source.others.clone(),
        }
    }

    /// A project-relative path of a file in the artifacts folder.
    pub fn rel_file(&self, name: &str) -> String {
        if self.rel.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.rel)
        }
    }

    pub fn file(&self, name: &str) -> ArtifactFile {
        self.dir.file(name)
    }
}

fn layout_error(message: String) -> BmadError {
    BmadError::usage("EPIC_LAYOUT_INVALID", message).hint(
        "implementation artifacts must be a folder inside the project; set [autopilot] implementation_artifacts in baton.toml",
    )
}

/// Resolves the artifacts folder; `configured` comes from `baton.toml`. The folder (when it
/// exists) is opened beneath the project: one leading outside is refused.
///
/// The rules, in order (see [`super::bmad_config`]): `baton.toml` (authoritative: its folder is
/// used even without a `sprint-status.yaml`); BMAD's configuration of every generation; then
/// the folders where BMAD projects keep the file ([`SEARCHED`]). A configured folder without a
/// `sprint-status.yaml` falls through to the next rule, and the layout says so; when no rule
/// finds the file, the first configured folder (else the default) is the layout, so the
/// refusal names it.
pub fn resolve(project: &Path, configured: Option<&str>) -> Result<Layout> {
    let root = untrusted::open_root(project).map_err(|e| BmadError::io("open", project)(e))?;
    let bmad = super::bmad_config::load(&root, project)?;
    let mut source = Source {
        story_dirs: bmad.story_dirs.clone(),
        ..Source::default()
    };
    if let Some(v) = configured {
        let from = "baton.toml [autopilot] implementation_artifacts".to_string();
        let rel = super::bmad_config::expand(v, project, &|_| None, 0)
            .and_then(|x| super::bmad_config::project_relative(project, &x))
            .map_err(|why| layout_error(format!("{from} ({v}) {why}")))?;
        let dir = Artifacts::open(project, &rel, &from, v)?;
        source.rule = from.clone();
        source.others = others(&root, &bmad, &rel);
        return Ok(Layout {
            project: project.to_path_buf(),
            dir,
            rel,
            from,
            source,
        });
    }
    let mut first_configured: Option<(String, String, String)> = None;
    let mut skipped: Vec<String> = Vec::new();
    for s in &bmad.artifacts {
        let rel = match &s.folder {
            Ok(rel) => rel,
            Err(why) => {
                skipped.push(format!("{} ({}) {why}; not used", s.rule, s.value));
                continue;
            }
        };
        let dir = Artifacts::open(project, rel, &s.rule, &s.value)?;
        if first_configured.is_none() {
            first_configured = Some((rel.clone(), s.rule.clone(), s.value.clone()));
        }
        if dir.has(SPRINT_STATUS) {
            source.rule = s.rule.clone();
            source.notes = skipped;
            source.others = others(&root, &bmad, rel);
            return Ok(Layout {
                project: project.to_path_buf(),
                rel: rel.clone(),
                dir,
                from: s.rule.clone(),
                source,
            });
        }
        skipped.push(format!(
            "{} names {}, which has no {}{}",
            s.rule,
            shown_dir(rel),
            SPRINT_STATUS,
            if dir.is_open() {
                ""
            } else {
                " (the folder does not exist)"
            }
        ));
    }
    for rel in SEARCHED {
        let rule = format!("search: {rel}");
        // A searched folder that leads outside the project is passed over, and said.
        let dir = match Artifacts::open(project, rel, &rule, rel) {
            Ok(d) => d,
            Err(e) => {
                skipped.push(format!("{rel}: {}; not searched", e.message));
                continue;
            }
        };
        if dir.has(SPRINT_STATUS) {
            source.rule = rule.clone();
            source.notes = skipped;
            source.others = others(&root, &bmad, rel);
            return Ok(Layout {
                project: project.to_path_buf(),
                rel: rel.to_string(),
                dir,
                from: rule,
                source,
            });
        }
    }
    // No sprint-status.yaml anywhere: the folder the configuration names (or the default),
    // so that the refusal names where BMAD's sprint-planning will write it.
    let (rel, from, value) = first_configured.unwrap_or_else(|| {
        (
            DEFAULT_DIR.to_string(),
            "the default".to_string(),
            DEFAULT_DIR.to_string(),
        )
    });
    let dir = Artifacts::open(project, &rel, &from, &value)?;
    source.rule = from.clone();
    source.notes = skipped;
    Ok(Layout {
        project: project.to_path_buf(),
        dir,
        rel,
        from,
        source,
    })
}

/// The folders searched, in order, when no configuration names one that holds the file.
pub const SEARCHED: [&str; 3] = [DEFAULT_DIR, "docs/sprint-artifacts", "docs"];

fn shown_dir(rel: &str) -> String {
    if rel.is_empty() {
        "the project folder".to_string()
    } else {
        format!("{rel}/")
    }
}

/// Every other `sprint-status.yaml` the rules lead to (configured folders first, then the
/// searched ones), besides the one in `chosen`.
fn others(root: &Dir, bmad: &super::bmad_config::BmadConfig, chosen: &str) -> Vec<OtherFile> {
    let mut seen = vec![chosen.to_string()];
    let mut out = Vec::new();
    let configured = bmad
        .artifacts
        .iter()
        .filter_map(|s| s.folder.as_ref().ok().map(|f| (f.clone(), s.rule.clone())));
    let searched = SEARCHED
        .iter()
        .map(|r| (r.to_string(), format!("search: {r}")));
    for (rel, rule) in configured.chain(searched) {
        if seen.contains(&rel) {
            continue;
        }
        seen.push(rel.clone());
        let file = if rel.is_empty() {
            SPRINT_STATUS.to_string()
        } else {
            format!("{rel}/{}", SPRINT_STATUS)
        };
        let present = untrusted::open_dir_in(root, Path::new(&rel))
            .ok()
            .flatten()
            .is_some_and(|d| {
                untrusted::kind_in(&d, Path::new(SPRINT_STATUS)).is_ok_and(|m| m.is_some())
            });
        if present {
            out.push(OtherFile { path: file, rule });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bmm_config_then_default_then_override() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        assert_eq!(resolve(root, None).unwrap().rel, DEFAULT_DIR);
        std::fs::create_dir_all(root.join("_bmad/bmm")).unwrap();
        std::fs::write(
            root.join(BMM_CONFIG),
            "implementation_artifacts: \"{project-root}/docs/impl\"\n",
        )
        .unwrap();
        let l = resolve(root, None).unwrap();
        assert_eq!(l.rel, "docs/impl");
        assert_eq!(&*l.dir, root.join("docs/impl"));
        assert_eq!(resolve(root, Some("work/./impl")).unwrap().rel, "work/impl");
        assert_eq!(
            resolve(root, Some("../elsewhere")).unwrap_err().code,
            "EPIC_LAYOUT_INVALID"
        );
        assert_eq!(
            resolve(root, Some("/etc")).unwrap_err().code,
            "EPIC_LAYOUT_INVALID"
        );
    }
}
