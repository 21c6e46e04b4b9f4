//! Stories mode: BMAD 6.12's folder+id contract. A spec folder holds `SPEC.md`, the ordered
//! story list `stories.yaml` and, once a story has started, its file `stories/{id}-{slug}.md`,
//! whose frontmatter `status:` is the story's status (no file yet: not started). `baton epic
//! run --stories <folder>` walks the list in order, each story through the phases, and writes
//! each status where BMAD's own skills write it: the story file's frontmatter. `sprint-status.yaml`
//! is neither read nor written in this mode.
//!
//! The loop's own files (`.run-epic-state.json`, progress, agent-state and review files, the
//! lock) stay in the implementation artifacts folder, as in sprint mode, so one epic runs per
//! project whatever its mode; the state file and baton's layout record name the spec folder,
//! and `baton epic resume` goes on in stories mode.

pub mod frontmatter;
pub mod schema;

pub use schema::StoryEntry;

use crate::error::{BmadError, Result};
use crate::phase::Phase;
use baton_autopilot::untrusted::{self, UntrustedError, limit};
use cap_std::fs::Dir;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

pub const STORIES_DIR: &str = "stories";
pub const SPEC_FILE: &str = "SPEC.md";
/// Most names read from a `stories/` folder.
pub const MAX_STORY_FILES: usize = 5_000;
/// How an epic run in stories mode is named in `.run-epic-state.json` (`stories:{folder}`):
/// never an `epic-N` of sprint-status.
pub const EPIC_PREFIX: &str = "stories:";

/// The epic id of a stories-mode run on `folder` (project-relative).
pub fn epic_id(folder: &str) -> String {
    format!("{EPIC_PREFIX}{folder}")
}

/// The spec folder of a stories-mode epic id (`None`: a sprint-status epic).
pub fn folder_of(epic_id: &str) -> Option<&str> {
    epic_id.strip_prefix(EPIC_PREFIX)
}

/// A spec folder, opened beneath the project once: every read and write goes through this
/// handle, so a folder later replaced by a link out of the project is never followed.
#[derive(Clone)]
pub struct SpecFolder {
    /// Project-relative, `/`-separated.
    pub rel: String,
    dir: Arc<Dir>,
}

impl std::fmt::Debug for SpecFolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SpecFolder").field(&self.rel).finish()
    }
}

/// Where a story stands, from its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// The story runs from this phase.
    Start(Phase),
    Done,
    /// A status the loop does not run (`blocked`, a file without a status, an unknown word).
    NotRunnable(String),
}

/// A story of the list and what its file says.
#[derive(Debug, Clone)]
pub struct StoryState {
    pub entry: StoryEntry,
    /// The story file's name in `stories/` (none yet: not started).
    pub file: Option<String>,
    /// Its frontmatter status (none: no file, or a file without one).
    pub status: Option<String>,
    /// Why the story's file cannot be used (two files match, an unreadable frontmatter).
    pub problem: Option<BmadError>,
}

impl StoryState {
    /// The status as shown: the frontmatter's, `not-started` without a file, `(none)` for a
    /// file without one.
    pub fn shown_status(&self) -> String {
        match (&self.file, &self.status) {
            (_, Some(s)) => s.clone(),
            (None, None) => "not-started".into(),
            (Some(_), None) => "(none)".into(),
        }
    }

    pub fn standing(&self) -> Standing {
        match (&self.file, self.status.as_deref()) {
            (None, _) | (Some(_), Some("draft")) => Standing::Start(Phase::CreateStory),
            (Some(_), Some("ready-for-dev")) => Standing::Start(Phase::Validate),
            (Some(_), Some("in-progress")) => Standing::Start(Phase::Dev),
            (Some(_), Some("in-review")) => Standing::Start(Phase::CodeReview),
            (Some(_), Some("done")) => Standing::Done,
            (Some(_), Some(other)) => Standing::NotRunnable(other.to_string()),
            (Some(_), None) => Standing::NotRunnable("(none)".into()),
        }
    }
}

fn folder_error(code: &'static str, message: String) -> BmadError {
    BmadError::usage(code, message).hint(
        "name the spec folder that holds stories.yaml (and SPEC.md), relative to the project: e.g. --stories _bmad-output/planning-artifacts/specs/my-epic",
    )
}

/// `given` as a `/`-separated path relative to `project` (canonical): relative paths are taken
/// from the project (then from the current directory), absolute ones must lie inside it.
fn relative_to(project: &Path, given: &str) -> Result<String> {
    let path = Path::new(given);
    let inside = |p: &Path| -> Option<PathBuf> {
        let canonical = std::fs::canonicalize(p).ok()?;
        canonical.strip_prefix(project).ok().map(Path::to_path_buf)
    };
    let rel: PathBuf = if path.is_absolute() {
        inside(path).ok_or_else(|| {
            folder_error(
                "STORIES_FOLDER_INVALID",
                format!("{given} is not a folder inside the project"),
            )
        })?
    } else if project.join(path).exists() || !path.exists() {
        path.to_path_buf()
    } else {
        inside(path).ok_or_else(|| {
            folder_error(
                "STORIES_FOLDER_INVALID",
                format!("{given} is not a folder inside the project"),
            )
        })?
    };
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => {
                return Err(folder_error(
                    "STORIES_FOLDER_INVALID",
                    format!("{given} must stay inside the project (no `..`)"),
                ));
            }
        }
    }
    Ok(parts.join("/"))
}

impl SpecFolder {
    /// The folder named on the command line (see [`relative_to`]); it must hold `stories.yaml`.
    pub fn open(project: &Path, given: &str) -> Result<SpecFolder> {
        let rel = relative_to(project, given)?;
        SpecFolder::open_rel(project, &rel)
    }

    /// The folder at `rel` (project-relative, as recorded).
    pub fn open_rel(project: &Path, rel: &str) -> Result<SpecFolder> {
        let root = untrusted::open_root(project).map_err(|e| BmadError::io("open", project)(e))?;
        let shown = if rel.is_empty() { "." } else { rel };
        let dir = match untrusted::open_dir_in(&root, Path::new(rel)) {
            Ok(Some(d)) => d,
            Ok(None) => {
                return Err(folder_error(
                    "STORIES_FOLDER_NOT_FOUND",
                    format!("the spec folder {shown} does not exist"),
                ));
            }
            Err(UntrustedError::Outside) => {
                return Err(folder_error(
                    "STORIES_FOLDER_INVALID",
                    format!(
                        "the spec folder {shown} leads outside the project (through a symlink)"
                    ),
                ));
            }
            Err(UntrustedError::NotRegular(_)) => {
                return Err(folder_error(
                    "STORIES_FOLDER_INVALID",
                    format!("{shown} is not a folder"),
                ));
            }
            Err(e) => return Err(crate::error::refused(shown, &e)),
        };
        let folder = SpecFolder {
            rel: rel.to_string(),
            dir: Arc::new(dir),
        };
        if untrusted::kind_in(&folder.dir, Path::new(schema::FILE_NAME))
            .ok()
            .flatten()
            .is_none()
        {
            return Err(BmadError::usage(
                "STORIES_YAML_MISSING",
                format!("{} does not exist", folder.shown(schema::FILE_NAME)),
            )
            .hint("stories mode walks the story list of a spec folder: bmad-spec's Story Breakdown writes stories.yaml next to SPEC.md"));
        }
        Ok(folder)
    }

    /// A path in the folder, project-relative (as messages and phases see it).
    pub fn shown(&self, name: &str) -> String {
        if self.rel.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.rel)
        }
    }

    /// The project-relative path of a story file.
    pub fn story_path(&self, name: &str) -> String {
        self.shown(&format!("{STORIES_DIR}/{name}"))
    }

    /// `stories.yaml`, read and checked strictly.
    pub fn entries(&self) -> Result<Vec<StoryEntry>> {
        let shown = self.shown(schema::FILE_NAME);
        let bytes = self
            .read(schema::FILE_NAME, limit::CONFIG)?
            .ok_or_else(|| {
                BmadError::usage("STORIES_YAML_MISSING", format!("{shown} does not exist"))
            })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            BmadError::usage(
                "STORIES_YAML_INVALID",
                format!("{shown}: is not UTF-8 text"),
            )
        })?;
        schema::parse(&shown, &text)
    }

    /// The raw bytes of `stories.yaml` (for the guard around a phase run).
    pub fn stories_bytes(&self) -> Option<Vec<u8>> {
        self.read(schema::FILE_NAME, limit::CONFIG).ok().flatten()
    }

    pub fn write_stories_bytes(&self, bytes: &[u8]) -> Result<()> {
        untrusted::write_in(&self.dir, schema::FILE_NAME, bytes)
            .map_err(|e| crate::error::refused(&self.shown(schema::FILE_NAME), &e))
    }

    /// Whether `SPEC.md` is there (a first dispatch plans from it).
    pub fn has_spec(&self) -> bool {
        untrusted::kind_in(&self.dir, Path::new(SPEC_FILE))
            .ok()
            .flatten()
            .is_some_and(|m| m.is_file())
    }

    fn read(&self, name: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        untrusted::read_in(&self.dir, Path::new(name), limit)
            .map_err(|e| crate::error::refused(&self.shown(name), &e))
    }

    /// The `stories/` folder, if there is one.
    fn stories_dir(&self) -> Result<Option<Dir>> {
        untrusted::open_dir_in(&self.dir, Path::new(STORIES_DIR))
            .map_err(|e| crate::error::refused(&self.shown(STORIES_DIR), &e))
    }

    /// The names in `stories/` (at most [`MAX_STORY_FILES`]), sorted.
    pub fn story_names(&self) -> Result<Vec<String>> {
        let Some(dir) = self.stories_dir()? else {
            return Ok(Vec::new());
        };
        let mut names: Vec<String> = dir
            .entries()
            .map_err(|e| BmadError::io("list", Path::new(&self.shown(STORIES_DIR)))(e))?
            .flatten()
            .take(MAX_STORY_FILES)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// A story file's text (bounded); `None` when it is gone.
    pub fn story_text(&self, name: &str) -> Result<Option<String>> {
        let Some(dir) = self.stories_dir()? else {
            return Ok(None);
        };
        let shown = self.story_path(name);
        let bytes = untrusted::read_in(&dir, Path::new(name), limit::PROMPT_FILE)
            .map_err(|e| crate::error::refused(&shown, &e))?;
        bytes
            .map(|b| {
                String::from_utf8(b).map_err(|_| {
                    BmadError::usage("STORY_FILE_INVALID", format!("{shown}: is not UTF-8 text"))
                })
            })
            .transpose()
    }

    /// Replaces a story file's text durably.
    pub fn write_story(&self, name: &str, text: &str) -> Result<()> {
        let shown = self.story_path(name);
        let dir = self.stories_dir()?.ok_or_else(|| {
            BmadError::failure("EPIC_IO_FAILED", format!("{shown}: the folder is gone"))
        })?;
        untrusted::write_in(&dir, name, text.as_bytes())
            .map_err(|e| crate::error::refused(&shown, &e))
    }

    /// Removes a story file (a missing one is fine).
    pub fn remove_story(&self, name: &str) -> Result<()> {
        let Some(dir) = self.stories_dir()? else {
            return Ok(());
        };
        untrusted::remove_in(&dir, name)
            .map_err(|e| crate::error::refused(&self.story_path(name), &e))
    }

    /// The frontmatter status of a story file.
    pub fn read_status(&self, name: &str) -> Result<Option<String>> {
        let shown = self.story_path(name);
        let Some(text) = self.story_text(name)? else {
            return Ok(None);
        };
        match frontmatter::status(&text) {
            Ok(frontmatter::Found::Status(s)) => Ok(Some(s)),
            Ok(frontmatter::Found::None) => Ok(None),
            Err(problem) => Err(BmadError::usage(
                "STORY_FILE_INVALID",
                format!("{shown}: {problem}"),
            )
            .hint("fix the story file's frontmatter (its `status:` is a single word), then run the command again")),
        }
    }

    /// Every story of the list with its file and status, in list order. A story whose file is
    /// ambiguous or unreadable carries the problem; the caller decides whether it is fatal.
    pub fn scan(&self) -> Result<Vec<StoryState>> {
        let entries = self.entries()?;
        let names = self.story_names()?;
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            let matching: Vec<&String> = names.iter().filter(|n| matches(&entry.id, n)).collect();
            let mut state = StoryState {
                file: None,
                status: None,
                problem: None,
                entry,
            };
            match matching.as_slice() {
                [] => {}
                [one] => {
                    state.file = Some((*one).clone());
                    match self.read_status(one) {
                        Ok(s) => state.status = s,
                        Err(e) => state.problem = Some(e),
                    }
                }
                many => state.problem = Some(self.ambiguous(&state.entry, many)),
            }
            out.push(state);
        }
        Ok(out)
    }

    fn ambiguous(&self, entry: &StoryEntry, files: &[&String]) -> BmadError {
        let shown: Vec<String> = files.iter().map(|n| self.story_path(n)).collect();
        BmadError::usage(
            "STORY_FILE_AMBIGUOUS",
            format!(
                "{} (line {}): story {:?} has {} files: {}; baton does not guess which one is the story",
                self.shown(schema::FILE_NAME),
                entry.line,
                entry.id,
                files.len(),
                shown.join(", ")
            ),
        )
        .hint(format!(
            "keep one file stories/{}-*.md for the story (remove or rename the others), then run the command again",
            entry.id
        ))
    }

    /// The one file of story `id` (`None`: not started); two are an error.
    pub fn file_of(&self, entry: &StoryEntry) -> Result<Option<String>> {
        let names = self.story_names()?;
        let matching: Vec<&String> = names.iter().filter(|n| matches(&entry.id, n)).collect();
        match matching.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some((*one).clone())),
            many => Err(self.ambiguous(entry, many)),
        }
    }
}

/// Whether `name` is a file of story `id`: `{id}-*.md` (ids are prefix-free, so at most one
/// story's pattern matches a name).
pub fn matches(id: &str, name: &str) -> bool {
    name.strip_prefix(id)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|rest| rest.ends_with(".md"))
}

/// The file name BMAD's folder+id dispatch derives for a story: `{id}-{slug}.md`, the slug in
/// kebab-case from the title.
pub fn derived_name(entry: &StoryEntry) -> String {
    let mut slug = String::new();
    for c in entry.title.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
        if slug.len() >= 60 {
            break;
        }
    }
    let slug = slug.trim_end_matches('-');
    let slug = if slug.is_empty() { "story" } else { slug };
    format!("{}-{slug}.md", entry.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, title: &str) -> StoryEntry {
        StoryEntry {
            id: id.into(),
            title: title.into(),
            description: "d".into(),
            spec_checkpoint: false,
            done_checkpoint: false,
            invoke_dev_with: String::new(),
            line: 1,
        }
    }

    #[test]
    fn story_files_match_by_id_and_dash() {
        assert!(matches("2", "2-sail-panel.md"));
        assert!(matches("3-1", "3-1-tail-ribbon.md"));
        assert!(!matches("1", "10-x.md"));
        assert!(!matches("2", "2.md"));
        assert!(!matches("2", "2-x.txt"));
        assert!(!matches("2", "22-x.md"));
    }

    #[test]
    fn names_are_derived_from_titles() {
        assert_eq!(
            derived_name(&entry("3-1", "Tail ribbon!")),
            "3-1-tail-ribbon.md"
        );
        assert_eq!(derived_name(&entry("4", "  ")), "4-story.md");
        assert_eq!(derived_name(&entry("5", "Été -- été")), "5-t-t.md");
    }

    #[test]
    fn a_folder_is_opened_beneath_the_project_only() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir_all(root.join("specs/kite/stories")).unwrap();
        std::fs::write(
            root.join("specs/kite/stories.yaml"),
            "- id: \"1\"\n  title: Spar\n  description: D\n- id: \"2\"\n  title: Sail\n  description: D\n",
        )
        .unwrap();
        std::fs::write(
            root.join("specs/kite/stories/1-spar.md"),
            "---\nstatus: done\n---\n",
        )
        .unwrap();
        std::fs::write(root.join("specs/kite/stories/2-a.md"), "x").unwrap();
        std::fs::write(root.join("specs/kite/stories/2-b.md"), "x").unwrap();
        let folder = SpecFolder::open(&root, "specs/kite").unwrap();
        assert_eq!(folder.rel, "specs/kite");
        let abs = SpecFolder::open(&root, root.join("specs/./kite").to_str().unwrap()).unwrap();
        assert_eq!(abs.rel, "specs/kite");
        let scan = folder.scan().unwrap();
        assert_eq!(scan[0].standing(), Standing::Done);
        let e = scan[1].problem.clone().unwrap();
        assert_eq!(e.code, "STORY_FILE_AMBIGUOUS");
        assert!(
            e.message.contains("specs/kite/stories.yaml (line 4)"),
            "{}",
            e.message
        );
        assert!(
            e.message
                .contains("specs/kite/stories/2-a.md, specs/kite/stories/2-b.md"),
            "{}",
            e.message
        );
        assert_eq!(
            SpecFolder::open(&root, "../x").unwrap_err().code,
            "STORIES_FOLDER_INVALID"
        );
        assert_eq!(
            SpecFolder::open(&root, "specs/none").unwrap_err().code,
            "STORIES_FOLDER_NOT_FOUND"
        );
        assert_eq!(
            SpecFolder::open(&root, "specs").unwrap_err().code,
            "STORIES_YAML_MISSING"
        );
        std::os::unix::fs::symlink("/tmp", root.join("specs/out")).unwrap();
        assert_eq!(
            SpecFolder::open(&root, "specs/out").unwrap_err().code,
            "STORIES_FOLDER_INVALID"
        );
    }
}
