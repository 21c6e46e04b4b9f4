//! Where a story's file is. BMAD projects keep story files in many places: the artifacts
//! folder, the `story_location` of `sprint-status.yaml`, the alpha `dev_story_location`, a
//! `stories/` subfolder, per-epic subfolders (`epic-1/`, `epic1/stories/`, `stories/epic-010/`),
//! under names such as `{key}.md`, `story-{key}.md`, `story-2.1.md`, `4.15-yield-tracking.md`
//! or BMAD 6.12's `spec-{key}.md` (frontmatter `status:`).
//!
//! The search is bounded (fixed folder shapes, a cap on folders and on names per folder) and
//! goes through the project's handle (a link out of the project is never followed). A story
//! found in two places is [`Lookup::Ambiguous`]: reported, never guessed.
//!
//! ```text
//! roots:   story_location (sprint-status.yaml), dev_story_location (config), the artifacts folder
//! folders: R, R/stories, R/epic*, R/epic*/stories, R/stories/epic*
//! names, best first (the best kind that matches decides):
//!   1. {key}.md, story-{key}.md, spec-{key}.md (spec-{key}-2.md)
//!   2. story-{key}-*.md, spec-{key}-*.md, {key}-*.md
//!   3. {e}.{s}.md, {e}.{s}-*.md, story-{e}.{s}.md, story-{e}.{s}-*.md
//!   4. {e}-{s}-*.md (a shorter or other slug)
//! ```

use super::bmad_config;
use super::layout::Layout;
use super::sprint::SprintStatus;
use baton_autopilot::untrusted::limit;
use serde::Serialize;

/// At most this many folders are listed.
pub const MAX_DIRS: usize = 256;
/// At most this many names are read from one folder.
pub const MAX_NAMES: usize = 10_000;
/// Lines of a story file looked at for its status.
const STATUS_LINES: usize = 200;

/// A story file found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoryFile {
    /// Project-relative, `/` separators.
    pub path: String,
    /// The status the file declares, as written (a `Status:` line, or `status:` in its
    /// frontmatter); `None`: it declares none, or could not be read (see `problem`).
    pub status: Option<String>,
    /// `frontmatter` or `line`.
    pub status_from: Option<&'static str>,
    /// Why the file could not be read for its status.
    pub problem: Option<String>,
    /// BMAD 6.x spec files of the same story beside this story file (`spec-{key}.md`), read
    /// for their status too: a spec further along moves the story's start (see
    /// [`StoryFiles::start`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub specs: Vec<StoryFile>,
}

/// What a search for one story found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    Found(StoryFile),
    /// No file; a new one goes to `expected`.
    Missing {
        expected: String,
    },
    /// Two or more files of the same kind: reported, never guessed.
    Ambiguous(Vec<StoryFile>),
}

impl Lookup {
    pub fn found(&self) -> Option<&StoryFile> {
        match self {
            Lookup::Found(f) => Some(f),
            _ => None,
        }
    }

    /// The path the phases are given: the file, else where a new one goes; `None` when the
    /// story was found twice.
    pub fn path(&self) -> Option<&str> {
        match self {
            Lookup::Found(f) => Some(&f.path),
            Lookup::Missing { expected } => Some(expected),
            Lookup::Ambiguous(_) => None,
        }
    }
}

/// The error of a story found in two places, located.
pub fn ambiguous_error(key: &str, files: &[StoryFile]) -> super::error::BmadError {
    super::error::BmadError::usage(
        "STORY_FILE_AMBIGUOUS",
        format!(
            "story {key} has {} files: {}; baton does not guess which one is the story",
            files.len(),
            files
                .iter()
                .map(|f| f.path.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
    .hint("keep one of them (move or rename the others), then run the command again")
}

/// The searched folders and their `.md` names, for every story key of a sprint status.
#[derive(Debug, Clone, Default)]
pub struct StoryFiles {
    /// Project-relative folders searched, in order.
    pub searched: Vec<String>,
    /// Settings passed over (a `story_location` from another machine), folders cut short.
    pub notes: Vec<String>,
    /// The folder a new story file goes to (project-relative).
    pub new_dir: String,
    /// `(folder, name)` of every `.md` file found, in search order.
    files: Vec<(String, String)>,
    /// Every key of `development_status` (a file is claimed by the longest key it names).
    keys: Vec<String>,
}

/// `story_location` of a sprint status (top level), quotes and a trailing comment removed.
pub fn story_location(sprint: &SprintStatus) -> Option<String> {
    sprint.text().lines().find_map(|line| {
        let rest = line.strip_prefix("story_location:")?;
        Some(yaml_scalar(rest))
    })
}

/// A one-line YAML scalar: quoted content, or the plain text before ` #`.
fn yaml_scalar(raw: &str) -> String {
    let t = raw.trim();
    for q in ['"', '\''] {
        if let Some(inner) = t.strip_prefix(q)
            && let Some(end) = inner.find(q)
        {
            return inner[..end].to_string();
        }
    }
    let cut = t.find(" #").map_or(t, |i| &t[..i]);
    cut.trim().to_string()
}

/// Where story files were looked for, as `baton epic status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchInfo {
    /// Project-relative folders searched, in order (those that exist).
    pub searched: Vec<String>,
    /// Where a new story file goes.
    pub new_files: String,
    /// Settings passed over (a `story_location` from another machine), searches cut short.
    pub notes: Vec<String>,
}

impl StoryFiles {
    pub fn info(&self) -> SearchInfo {
        SearchInfo {
            searched: self.searched.clone(),
            new_files: if self.new_dir.is_empty() {
                ".".into()
            } else {
                self.new_dir.clone()
            },
            notes: self.notes.clone(),
        }
    }

    /// Lists the folders where the stories of `sprint` may be.
    pub fn scan(layout: &Layout, sprint: &SprintStatus) -> StoryFiles {
        let mut out = StoryFiles {
            keys: sprint.entries().iter().map(|e| e.key.clone()).collect(),
            ..StoryFiles::default()
        };
        let project = layout.project.as_path();
        let artifacts_abs = layout.dir.to_string_lossy().into_owned();
        let lookup = |k: &str| match k {
            "implementation_artifacts" | "sprint_artifacts" => Some(artifacts_abs.clone()),
            _ => None,
        };
        let mut roots: Vec<String> = Vec::new();
        if let Some(value) = story_location(sprint).filter(|v| !v.is_empty()) {
            match bmad_config::expand(&value, project, &lookup, 0)
                .and_then(|v| bmad_config::project_relative(project, &v))
            {
                Ok(rel) => roots.push(rel),
                Err(why) => out.notes.push(format!(
                    "{} story_location ({value}) {why}; not used",
                    layout.rel_file(super::sprint::FILE_NAME)
                )),
            }
        }
        for s in &layout.source.story_dirs {
            match &s.folder {
                Ok(rel) => roots.push(rel.clone()),
                Err(why) => out
                    .notes
                    .push(format!("{} ({}) {why}; not used", s.rule, s.value)),
            }
        }
        roots.push(layout.rel.clone());
        // New story files go to the first of these folders that exists (a stale
        // `story_location` naming a folder nobody made is passed over).
        out.new_dir = roots
            .iter()
            .find(|r| layout.dir.project_dir(r).is_some())
            .unwrap_or(&layout.rel)
            .clone();
        let mut dirs: Vec<String> = Vec::new();
        for root in &roots {
            for d in shape(layout, root) {
                if !dirs.contains(&d) {
                    dirs.push(d);
                }
            }
        }
        if dirs.len() > MAX_DIRS {
            out.notes.push(format!(
                "only the first {MAX_DIRS} of {} story folders were searched",
                dirs.len()
            ));
            dirs.truncate(MAX_DIRS);
        }
        let mut searched = Vec::new();
        for d in &dirs {
            let Some(dir) = layout.dir.project_dir(d) else {
                continue;
            };
            searched.push(d.clone());
            let Ok(entries) = dir.entries() else {
                continue;
            };
            let mut n = 0;
            for e in entries.flatten() {
                n += 1;
                if n > MAX_NAMES {
                    out.notes.push(format!(
                        "{}: only the first {MAX_NAMES} names were searched",
                        shown(d)
                    ));
                    break;
                }
                let name = e.file_name().to_string_lossy().into_owned();
                let is_file = e.file_type().is_ok_and(|t| t.is_file());
                if is_file && name.to_ascii_lowercase().ends_with(".md") {
                    out.files.push((d.clone(), name));
                }
            }
        }
        out.searched = searched;
        out
    }

    /// Scans, then looks up one story.
    pub fn find(layout: &Layout, sprint: &SprintStatus, key: &str) -> Lookup {
        StoryFiles::scan(layout, sprint).lookup(layout, key)
    }

    /// The text of `key`'s file (bounded), when it is found once.
    pub fn text(&self, layout: &Layout, key: &str) -> Option<String> {
        let path = self.lookup(layout, key).found()?.path.clone();
        let bytes = layout
            .dir
            .read_project_file(&path, limit::PROMPT_FILE)
            .ok()??;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Where a new file of `key` goes (project-relative).
    pub fn new_file(&self, key: &str) -> String {
        join(&self.new_dir, &format!("{key}.md"))
    }

    /// The file of `key`, read for its status.
    pub fn lookup(&self, layout: &Layout, key: &str) -> Lookup {
        let Some(parts) = KeyParts::of(key) else {
            return Lookup::Missing {
                expected: self.new_file(key),
            };
        };
        let mut best: Option<(u8, Vec<String>)> = None;
        for (dir, name) in &self.files {
            let Some(tier) = parts.tier(name, &self.keys) else {
                continue;
            };
            let path = join(dir, name);
            match &mut best {
                Some((t, paths)) if *t == tier => {
                    if !paths.contains(&path) {
                        paths.push(path);
                    }
                }
                Some((t, _)) if *t < tier => {}
                _ => best = Some((tier, vec![path])),
            }
        }
        match best {
            None => Lookup::Missing {
                expected: self.new_file(key),
            },
            Some((_, paths)) if paths.len() == 1 => Lookup::Found(read(layout, &paths[0])),
            Some((_, paths)) => match story_beside_specs(&paths) {
                Some(story) => {
                    let mut f = read(layout, story);
                    f.specs = paths
                        .iter()
                        .filter(|p| *p != story)
                        .map(|p| read(layout, p))
                        .collect();
                    Lookup::Found(f)
                }
                None => Lookup::Ambiguous(paths.iter().map(|p| read(layout, p)).collect()),
            },
        }
    }
}

/// One story file beside spec files of the same story: BMAD 6.x keeps both (the story
/// `{key}.md` that create-story wrote, the `spec-{key}.md` its build wrote from it), so this
/// is not two places of one story; the story file is the story's file.
fn story_beside_specs(paths: &[String]) -> Option<&String> {
    let is_spec = |p: &String| p.rsplit('/').next().is_some_and(|n| n.starts_with("spec-"));
    let mut stories = paths.iter().filter(|p| !is_spec(p));
    let story = stories.next()?;
    (stories.next().is_none() && paths.iter().any(is_spec)).then_some(story)
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

fn shown(dir: &str) -> String {
    if dir.is_empty() {
        ".".into()
    } else {
        dir.to_string()
    }
}

/// `R`, `R/stories`, `R/epic*`, `R/epic*/stories`, `R/stories/epic*` (those that exist).
fn shape(layout: &Layout, root: &str) -> Vec<String> {
    let mut out = vec![root.to_string()];
    let stories = join(root, "stories");
    let epic_dirs = |parent: &str| -> Vec<String> {
        let Some(dir) = layout.dir.project_dir(parent) else {
            return Vec::new();
        };
        let Ok(entries) = dir.entries() else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .flatten()
            .take(MAX_NAMES)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.to_ascii_lowercase().starts_with("epic"))
            .collect();
        names.sort();
        names.into_iter().map(|n| join(parent, &n)).collect()
    };
    if layout.dir.project_dir(&stories).is_some() {
        out.push(stories.clone());
    }
    for e in epic_dirs(root) {
        let inner = join(&e, "stories");
        out.push(e);
        if layout.dir.project_dir(&inner).is_some() {
            out.push(inner);
        }
    }
    out.extend(epic_dirs(&stories));
    out
}

/// A file read for its status (bounded); a file that cannot be read is still found.
fn read(layout: &Layout, path: &str) -> StoryFile {
    let mut f = StoryFile {
        path: path.to_string(),
        status: None,
        status_from: None,
        problem: None,
        specs: Vec::new(),
    };
    match layout.dir.read_project_file(path, limit::PROMPT_FILE) {
        Ok(Some(bytes)) => {
            if let Some((status, from)) = declared_status(&String::from_utf8_lossy(&bytes)) {
                f.status = Some(status);
                f.status_from = Some(from);
            }
        }
        Ok(None) => f.problem = Some("it disappeared while it was read".into()),
        Err(e) => f.problem = Some(format!("{}: {}", e.code, e.message)),
    }
    f
}

/// The status a story file declares: `status:` in its frontmatter, else a `Status:` line
/// (`Status: review`, `**Status:** done`, `## Status: drafted`), else the first line under a
/// `## Status` heading.
pub fn declared_status(text: &str) -> Option<(String, &'static str)> {
    let mut lines = text.lines().take(STATUS_LINES);
    let first = text.lines().next().map(str::trim_end);
    if first == Some("---") {
        lines.next();
        for line in lines.by_ref() {
            if line.trim_end() == "---" {
                break;
            }
            if let Some(rest) = line.strip_prefix("status:") {
                let v = yaml_scalar(rest);
                return (!v.is_empty()).then_some((v, "frontmatter"));
            }
        }
    }
    let mut heading = false;
    for line in lines {
        let t = line.trim();
        if heading {
            if t.is_empty() {
                continue;
            }
            let v = clean(t);
            return (!v.is_empty()).then_some((v, "line"));
        }
        let bare = t.trim_start_matches('#').trim_start();
        let bare = bare.trim_start_matches(['*', '_']);
        let lower = bare.to_ascii_lowercase();
        let Some(rest) = lower.strip_prefix("status") else {
            continue;
        };
        let rest_orig = &bare[bare.len() - rest.len()..];
        let rest_orig = rest_orig.trim_start_matches(['*', '_']).trim_start();
        if let Some(value) = rest_orig.strip_prefix(':') {
            let v = clean(value);
            if !v.is_empty() {
                return Some((v, "line"));
            }
        } else if rest_orig.trim_matches(['*', '_', ' ']).is_empty() && t.starts_with('#') {
            heading = true;
        }
    }
    None
}

fn clean(v: &str) -> String {
    v.trim()
        .trim_matches(['*', '_', '`', '"', '\''])
        .trim()
        .to_string()
}

/// A file status in sprint-status terms (`in-review` → `review`, `In progress` →
/// `in-progress`, `drafted` → `ready-for-dev`, `draft` → `backlog`, `completed` → `done`);
/// `None` for a value outside them (`blocked`, …).
pub fn as_sprint_status(file_status: &str) -> Option<&'static str> {
    let n = file_status
        .trim()
        .to_ascii_lowercase()
        .replace([' ', '_'], "-");
    Some(match n.as_str() {
        "draft" | "backlog" => "backlog",
        "drafted" | "ready-for-dev" | "ready" => "ready-for-dev",
        "in-progress" | "contexted" => "in-progress",
        "review" | "in-review" | "ready-for-review" => "review",
        "done" | "completed" | "complete" => "done",
        _ => return None,
    })
}

const ORDER: [&str; 5] = ["backlog", "ready-for-dev", "in-progress", "review", "done"];

/// The rule for a story whose file is further along than `sprint-status.yaml`: the file moves
/// the story's start up, at most to code-review (a file never marks a story done: a BMAD 6.12
/// spec says `done` when the build is finished, before the review; only sprint-status says a
/// story is done). `sprint` is the sprint status with legacy values mapped. Returns the status
/// to start from, when the file changes it.
pub fn start_status(sprint: &str, file: &StoryFile) -> Option<&'static str> {
    let s = ORDER.iter().position(|x| *x == sprint)?;
    let f = ORDER
        .iter()
        .position(|x| Some(*x) == file.status.as_deref().and_then(as_sprint_status))?;
    let f = f.min(3);
    (f > s && sprint != "done").then_some(ORDER[f])
}

/// The epic and story ids of a key (`1-2a-slug` → `1`, `2a`), for the names that use them.
struct KeyParts<'a> {
    key: &'a str,
    epic: &'a str,
    story: &'a str,
}

fn same_id(a: &str, b: &str) -> bool {
    let a = a.trim_start_matches('0');
    let b = b.trim_start_matches('0');
    a.eq_ignore_ascii_case(b)
}

/// A file's name without `.md`, lower-cased, without a `story-`/`spec-` prefix; and whether
/// it had `spec-`.
fn stem(name: &str) -> Option<(String, bool)> {
    let lower = name.to_ascii_lowercase();
    let s = lower.strip_suffix(".md")?;
    for (p, spec) in [("story-", false), ("story_", false), ("spec-", true)] {
        if let Some(rest) = s.strip_prefix(p) {
            return Some((rest.to_string(), spec));
        }
    }
    Some((s.to_string(), false))
}

impl<'a> KeyParts<'a> {
    fn of(key: &'a str) -> Option<KeyParts<'a>> {
        let mut it = key.splitn(3, '-');
        let epic = it.next()?;
        let story = it.next()?;
        it.next()?;
        if epic.is_empty() || story.is_empty() || epic.eq_ignore_ascii_case("epic") {
            return None;
        }
        Some(KeyParts { key, epic, story })
    }

    /// How well `name` names this story (1 best), `None`: not at all, or it names a longer
    /// key of the file better.
    fn tier(&self, name: &str, keys: &[String]) -> Option<u8> {
        let (s, spec) = stem(name)?;
        let key = self.key.to_ascii_lowercase();
        // A longer key that the name also starts with claims the file.
        let claimed_by_longer = |len: usize| {
            keys.iter().any(|k| {
                k.len() > len && {
                    let k = k.to_ascii_lowercase();
                    s == k || s.starts_with(&format!("{k}-"))
                }
            })
        };
        if s == key {
            return Some(1);
        }
        if let Some(rest) = s.strip_prefix(&format!("{key}-")) {
            if claimed_by_longer(key.len()) {
                return None;
            }
            return Some(if spec && rest.bytes().all(|b| b.is_ascii_digit()) {
                1
            } else {
                2
            });
        }
        // {e}.{s}[-slug]
        if let Some((e, rest)) = s.split_once('.') {
            let (st, _) = rest.split_once('-').unwrap_or((rest, ""));
            if same_id(e, self.epic) && same_id(st, self.story) && !st.contains('.') {
                return Some(3);
            }
        }
        // {e}-{s}-other-slug
        let mut it = s.splitn(3, '-');
        if let (Some(e), Some(st), Some(_)) = (it.next(), it.next(), it.next())
            && same_id(e, self.epic)
            && same_id(st, self.story)
            && !keys.iter().any(|k| {
                let k = k.to_ascii_lowercase();
                k != key && (s == k || s.starts_with(&format!("{k}-")))
            })
        {
            return Some(4);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tier(key: &str, name: &str, keys: &[&str]) -> Option<u8> {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        KeyParts::of(key).unwrap().tier(name, &keys)
    }

    #[test]
    fn names_match_by_kind() {
        let k = "1-2-glass-chimney";
        let keys = [k, "1-2a-chimney-gasket", "1-20-x"];
        assert_eq!(tier(k, "1-2-glass-chimney.md", &keys), Some(1));
        assert_eq!(tier(k, "story-1-2-glass-chimney.md", &keys), Some(1));
        assert_eq!(tier(k, "spec-1-2-glass-chimney.md", &keys), Some(1));
        assert_eq!(tier(k, "spec-1-2-glass-chimney-2.md", &keys), Some(1));
        assert_eq!(tier(k, "1-2-glass-chimney-notes.md", &keys), Some(2));
        assert_eq!(tier(k, "story-1.2.md", &keys), Some(3));
        assert_eq!(tier(k, "1.2-glass.md", &keys), Some(3));
        assert_eq!(tier(k, "01.02-glass.md", &keys), Some(3));
        assert_eq!(tier(k, "1-2-glass.md", &keys), Some(4));
        assert_eq!(tier(k, "1-2a-chimney-gasket.md", &keys), None);
        assert_eq!(tier(k, "1.20-x.md", &keys), None);
        assert_eq!(tier(k, "1.2.1-x.md", &keys), None);
        assert_eq!(tier(k, "1-2-glass-chimney.context.xml", &keys), None);
        // A longer key claims the file it names.
        let keys = ["1-1-a", "1-1-a-b"];
        assert_eq!(tier("1-1-a", "1-1-a-b.md", &keys), None);
        assert_eq!(tier("1-1-a-b", "1-1-a-b.md", &keys), Some(1));
        assert!(KeyParts::of("epic-1-retro-item-1").is_none());
    }

    #[test]
    fn a_story_file_beside_its_spec_is_the_story_file() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let both = p(&["impl/spec-1-2-a.md", "impl/1-2-a.md"]);
        assert_eq!(
            story_beside_specs(&both).map(String::as_str),
            Some("impl/1-2-a.md")
        );
        assert_eq!(
            story_beside_specs(&p(&["impl/1-2-a.md", "impl/stories/1-2-a.md"])),
            None
        );
        assert_eq!(
            story_beside_specs(&p(&["impl/spec-1-2-a.md", "impl/spec-1-2-a-2.md"])),
            None
        );
        let two = p(&["a/1-2-a.md", "b/1-2-a.md", "a/spec-1-2-a.md"]);
        assert_eq!(story_beside_specs(&two), None);
    }

    #[test]
    fn statuses_are_read_from_frontmatter_or_a_line() {
        let s = |t: &str| declared_status(t).map(|(v, f)| (v, f.to_string()));
        assert_eq!(
            s("---\ntitle: 'x'\nstatus: 'in-review'\n---\nStatus: done\n"),
            Some(("in-review".into(), "frontmatter".into()))
        );
        assert_eq!(
            s("# Story 1.2\n\nStatus: ready-for-dev\n"),
            Some(("ready-for-dev".into(), "line".into()))
        );
        assert_eq!(
            s("**Status:** done\n"),
            Some(("done".into(), "line".into()))
        );
        assert_eq!(
            s("# S\n\n## Status\n\nIn progress\n"),
            Some(("In progress".into(), "line".into()))
        );
        assert_eq!(s("# S\n\nNo status here.\n"), None);
        assert_eq!(as_sprint_status("In progress"), Some("in-progress"));
        assert_eq!(as_sprint_status("in-review"), Some("review"));
        assert_eq!(as_sprint_status("blocked"), None);
    }

    #[test]
    fn a_file_further_along_moves_the_start_up_to_review_at_most() {
        let f = |s: &str| StoryFile {
            path: "x.md".into(),
            status: Some(s.into()),
            status_from: Some("frontmatter"),
            problem: None,
            specs: Vec::new(),
        };
        assert_eq!(start_status("in-progress", &f("in-review")), Some("review"));
        assert_eq!(start_status("in-progress", &f("done")), Some("review"));
        assert_eq!(
            start_status("ready-for-dev", &f("in-progress")),
            Some("in-progress")
        );
        assert_eq!(start_status("review", &f("done")), None);
        assert_eq!(start_status("review", &f("in-progress")), None);
        assert_eq!(start_status("in-progress", &f("blocked")), None);
        assert_eq!(start_status("done", &f("in-progress")), None);
    }
}

/// Where a story starts, with its file taken into account (see [`start_status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// The status the story starts from (sprint-status's, legacy values mapped, or the one
    /// its file moves it up to).
    pub status: String,
    /// The story's file (project-relative), when found once.
    pub file: Option<String>,
    /// Why the start differs from what sprint-status alone says, or what is wrong with the
    /// file (found twice), for the plan line.
    pub note: Option<String>,
    /// The files of a story found twice (empty otherwise): the loop refuses to start it.
    pub ambiguous: Vec<StoryFile>,
}

impl StoryFiles {
    /// Where `key` starts, given its sprint status (legacy values mapped).
    pub fn start(&self, layout: &Layout, key: &str, sprint_status: &str) -> Start {
        let mut start = Start {
            status: sprint_status.to_string(),
            file: None,
            note: None,
            ambiguous: Vec::new(),
        };
        match self.lookup(layout, key) {
            Lookup::Found(f) => {
                // The story file, or a spec beside it, whichever is further along.
                let ahead = std::iter::once(&f)
                    .chain(&f.specs)
                    .filter_map(|c| start_status(sprint_status, c).map(|to| (to, c)))
                    .max_by_key(|(to, _)| ORDER.iter().position(|x| x == to));
                if let Some((to, c)) = ahead {
                    start.note = Some(format!(
                        "its file {} says {} while sprint-status says {sprint_status}: it starts from {to} (a story file moves the start up, never past code-review)",
                        c.path,
                        c.status.as_deref().unwrap_or_default(),
                    ));
                    start.status = to.to_string();
                } else if let Some(other) = f
                    .status
                    .as_deref()
                    .filter(|s| as_sprint_status(s).is_none())
                {
                    // `blocked` (a halted BMAD build), or a word of the project's own: said,
                    // not acted on.
                    start.note = Some(format!(
                        "its file {} says {other}, which is not a story status; sprint-status ({sprint_status}) decides where it starts",
                        f.path
                    ));
                }
                start.file = Some(f.path);
            }
            Lookup::Ambiguous(files) => {
                start.note = Some(format!(
                    "found twice ({}): its phases stop until one is kept",
                    files
                        .iter()
                        .map(|f| f.path.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                start.ambiguous = files;
            }
            Lookup::Missing { .. } => {}
        }
        start
    }
}
