//! `--parallel`: each story in flight works in its own git worktree, on branch
//! `baton/<epic>/<story>`, in a folder outside the project's work tree
//! (`<root>/<epic>/<story>`, the root being the store's folder of the project or
//! `[autopilot] worktrees`).
//!
//! Every worktree has a record, `<root>/<epic>/<story>.worktree.json`, written durably *before*
//! git is asked to do anything, so a process killed at any moment leaves a record that says what
//! it was doing:
//!
//! - `creating`: [`Worktrees::create`] runs again and finishes the job: a worktree already
//!   registered on the right branch is adopted; one that `git worktree add` left half made
//!   (still locked `initializing`, or registered without its folder) is removed and made again;
//!   a branch it had already made is reused (it still points at the base).
//! - `ready`: the worktree exists; `create` adopts it (a paused story resumes there).
//! - `removing`: [`Worktrees::remove`] (or [`Worktrees::recover`]) finishes the removal.
//!
//! A branch or a folder that exists without a record was not made by baton and is never
//! touched: `create` refuses it. The record sits next to the worktree, not in it, so the model
//! working in the worktree cannot write it.
//!
//! git runs confined like every git command of the autopilot (see [`super::git`]): in the
//! project's sandbox with `.git` writable, plus the worktrees' root, hooks off. Commands in a
//! worktree name its administrative folder explicitly (`--git-dir`), so a `.git` file the model
//! rewrote in the worktree cannot send them to another repository.

use super::error::{EpicError, Result};
use super::git::{self, GitOutput};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A merge under way, in the worktree's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "step",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum MergeStep {
    /// Rebasing the story's commit onto `tip`.
    Rebasing { tip: String, story: String },
    /// The rebase conflicted: the worktree is being put on `tip` with the changes of commit
    /// `story` applied and the conflicts marked.
    Conflict {
        tip: String,
        story: String,
        files: Vec<String>,
        tail: String,
    },
    /// The verify commands run on `rebased` (a commit on `tip`).
    Verifying { tip: String, rebased: String },
    /// The epic's branch moves from `tip` to `commit`, then the main work tree follows.
    Advancing { tip: String, commit: String },
    /// Done: the epic's branch has `commit`.
    Merged { commit: String },
}

/// Suffix of a worktree's record, next to its folder.
pub const RECORD_SUFFIX: &str = ".worktree.json";
/// Branches of story worktrees: `baton/<epic>/<story>`.
pub const BRANCH_PREFIX: &str = "baton/";
/// Largest record read.
const RECORD_LIMIT: u64 = 256 * 1024;
/// Records listed at most (per epic folder and epic folders).
const MAX_LISTED: usize = 10_000;

/// Options every git command of the parallel mode runs with, besides baton-git's (no hook, no
/// file-system monitor, no nested repository entered): no signing prompt, nothing stashed or
/// moved behind our back.
pub const GIT_SAFE: [&str; 14] = [
    "-c",
    "commit.gpgSign=false",
    "-c",
    "rebase.autoStash=false",
    "-c",
    "rebase.updateRefs=false",
    "-c",
    "merge.autoStash=false",
    "-c",
    "advice.detachedHead=false",
    "-c",
    "rerere.enabled=false",
    "-c",
    "worktree.useRelativePaths=false",
];

/// Where a worktree stands in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorktreeState {
    Creating,
    Ready,
    Removing,
}

/// Why a worktree is kept after its story stopped (shown by `epic status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    pub reason: String,
    pub at: String,
}

/// One worktree's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorktreeRecord {
    pub version: u32,
    pub epic: String,
    pub story: String,
    /// `baton/<epic>/<story>`
    pub branch: String,
    /// The commit the branch was made from.
    pub base: String,
    /// The worktree's folder (absolute).
    pub path: PathBuf,
    pub state: WorktreeState,
    /// Its folder under the repository's `worktrees/` (known once made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<String>,
    /// Whether a removal under way also deletes the branch.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete_branch: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<Kept>,
    /// A merge under way (see [`super::merge`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeStep>,
    pub created_at: String,
}

impl WorktreeRecord {
    pub fn is_kept(&self) -> bool {
        self.kept.is_some()
    }
}

/// A worktree ready for work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    pub record: WorktreeRecord,
    /// The repository's administrative folder of this worktree (`<.git>/worktrees/<name>`).
    pub git_dir: PathBuf,
}

impl Worktree {
    /// The folder the story's phase runs use as `@project`.
    pub fn path(&self) -> &Path {
        &self.record.path
    }

    pub fn branch(&self) -> &str {
        &self.record.branch
    }
}

/// What [`Worktrees::list`] sees of one worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// `None`: git has a worktree under the root that no record names (left by someone else).
    pub record: Option<WorktreeRecord>,
    pub path: PathBuf,
    pub live: Live,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Live {
    /// Registered, on its branch, at this commit.
    Ready { head: String },
    /// Registered but unfinished, locked, on another branch or without its folder.
    Damaged(String),
    /// Not registered in git (a record whose creation had not begun, or whose removal ended).
    Absent,
}

/// The worktrees of one project.
#[derive(Debug, Clone)]
pub struct Worktrees {
    project: PathBuf,
    common_dir: PathBuf,
    root: PathBuf,
}

/// `[autopilot] worktrees` (relative to the project root) when set, else `worktrees` in the
/// store's folder of the project (`baton_store::Project::dir`).
pub fn root_for(
    project_root: &Path,
    configured: Option<&str>,
    store_project_dir: &Path,
) -> PathBuf {
    match configured {
        Some(c) => project_root.join(c),
        None => store_project_dir.join("worktrees"),
    }
}

/// `baton/<epic>/<story>`
pub fn branch_name(epic: &str, story: &str) -> String {
    format!("{BRANCH_PREFIX}{epic}/{story}")
}

/// A name used as a folder and a branch component: letters, digits, `.`, `_`, `-`; no leading
/// `.` or `-`, no `..`, no `.lock` at the end.
pub fn check_name(what: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 120
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !name.starts_with(['.', '-'])
        && !name.contains("..")
        && !name.ends_with(".lock");
    if ok {
        Ok(())
    } else {
        Err(EpicError::usage(
            "EPIC_WORKTREE_NAME_INVALID",
            format!("{what} {name:?} cannot name a worktree and a branch"),
        )
        .hint("keys of parallel stories use letters, digits, '.', '_' and '-' only"))
    }
}

fn now() -> String {
    baton_store::time::now_rfc3339()
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EpicError {
    EpicError::io(action, path)
}

/// Bounded text of a failed command, for an error message.
pub fn tail(text: &str, max: usize) -> String {
    let t = text.trim();
    if t.len() <= max {
        return t.to_string();
    }
    let mut start = t.len() - max;
    while !t.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &t[start..])
}

fn failed(what: &str, out: &GitOutput) -> EpicError {
    let text = if out.stderr.trim().is_empty() {
        &out.stdout
    } else {
        &out.stderr
    };
    EpicError::failure(
        "EPIC_GIT_FAILED",
        format!("git {what} failed: {}", tail(text, 2000)),
    )
}

impl Worktrees {
    /// The worktrees of the git work tree `project`, kept under `root` (made if missing; it
    /// must be outside the project's work tree).
    pub fn open(project: &Path, root: &Path) -> Result<Worktrees> {
        let project = std::fs::canonicalize(project).map_err(io("open", project))?;
        std::fs::create_dir_all(root).map_err(io("create", root))?;
        let root = std::fs::canonicalize(root).map_err(io("open", root))?;
        if root.starts_with(&project) || project.starts_with(&root) {
            return Err(EpicError::usage(
                "EPIC_WORKTREES_INSIDE_PROJECT",
                "the folder of the story worktrees overlaps the project",
            )
            .hint("set [autopilot] worktrees to a folder outside the project, or leave it unset (the store keeps them)"));
        }
        let out = git::run(&project, &[], &["rev-parse", "--git-common-dir"], &[])?;
        if !out.ok() {
            return Err(failed("rev-parse --git-common-dir", &out)
                .hint("--parallel needs the project to be a git work tree with a first commit"));
        }
        let common = project.join(out.stdout.trim());
        let common_dir = std::fs::canonicalize(&common).map_err(io("open", &common))?;
        Ok(Worktrees {
            project,
            common_dir,
            root,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn project(&self) -> &Path {
        &self.project
    }

    /// The repository's common git folder (`<project>/.git`).
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    fn record_path(&self, epic: &str, story: &str) -> PathBuf {
        self.root.join(epic).join(format!("{story}{RECORD_SUFFIX}"))
    }

    fn folder(&self, epic: &str, story: &str) -> PathBuf {
        self.root.join(epic).join(story)
    }

    /// git in the main work tree, with the worktrees' root writable.
    pub fn git_main(&self, args: &[&str]) -> Result<GitOutput> {
        let mut all: Vec<&str> = GIT_SAFE.to_vec();
        all.extend_from_slice(args);
        git::run(
            &self.project,
            std::slice::from_ref(&self.root),
            &all,
            &[("GIT_LITERAL_PATHSPECS", "1".to_string())],
        )
    }

    /// git in the main work tree; a non-zero exit is an error.
    pub fn git_main_ok(&self, args: &[&str]) -> Result<String> {
        let out = self.git_main(args)?;
        if !out.ok() {
            return Err(failed(&args.join(" "), &out));
        }
        Ok(out.stdout)
    }

    /// git in a worktree, its administrative folder and work tree named explicitly.
    pub fn git_in(&self, wt: &Worktree, args: &[&str]) -> Result<GitOutput> {
        let git_dir = format!("--git-dir={}", wt.git_dir.display());
        let work_tree = format!("--work-tree={}", wt.record.path.display());
        let cd = wt.record.path.to_string_lossy().into_owned();
        let mut all: Vec<&str> = GIT_SAFE.to_vec();
        all.extend_from_slice(&["-C", &cd, &git_dir, &work_tree]);
        all.extend_from_slice(args);
        git::run(
            &self.project,
            std::slice::from_ref(&self.root),
            &all,
            &[("GIT_LITERAL_PATHSPECS", "1".to_string())],
        )
    }

    pub fn git_in_ok(&self, wt: &Worktree, args: &[&str]) -> Result<String> {
        let out = self.git_in(wt, args)?;
        if !out.ok() {
            return Err(failed(&args.join(" "), &out));
        }
        Ok(out.stdout)
    }

    /// The commit a ref names, `None` when it does not exist.
    pub fn resolve(&self, reference: &str) -> Result<Option<String>> {
        let spec = format!("{reference}^{{commit}}");
        let out = self.git_main(&["rev-parse", "--verify", "-q", &spec])?;
        Ok(out.ok().then(|| out.stdout.trim().to_string()))
    }

    /// Reads a record; `None` when there is none.
    pub fn read_record(&self, epic: &str, story: &str) -> Result<Option<WorktreeRecord>> {
        check_name("epic", epic)?;
        check_name("story", story)?;
        read_record_at(&self.record_path(epic, story))
    }

    /// Writes a record durably (temporary file, fsync, rename, fsync of the folder).
    pub fn write_record(&self, record: &WorktreeRecord) -> Result<()> {
        let path = self.record_path(&record.epic, &record.story);
        let mut bytes = serde_json::to_vec_pretty(record)
            .map_err(|e| EpicError::failure("EPIC_IO_FAILED", e.to_string()))?;
        bytes.push(b'\n');
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        }
        baton_store::durable::atomic_write(&path, &bytes)?;
        Ok(())
    }

    fn delete_record(&self, epic: &str, story: &str) -> Result<()> {
        let path = self.record_path(epic, story);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io("remove", &path)(e)),
        }
        if let Some(dir) = path.parent() {
            baton_store::durable::sync_dir(dir)?;
        }
        Ok(())
    }

    /// git's worktrees, from `git worktree list --porcelain -z`.
    fn registered(&self) -> Result<Vec<Registered>> {
        let out = self.git_main_ok(&["worktree", "list", "--porcelain", "-z"])?;
        Ok(parse_porcelain(&out))
    }

    /// The worktree of `story`, making it from `base` (a commit) if needed. Idempotent, and
    /// safe to call again after a kill at any point (see the module's documentation). A kept
    /// worktree is adopted and no longer kept.
    pub fn create(&self, epic: &str, story: &str, base: &str) -> Result<Worktree> {
        check_name("epic", epic)?;
        check_name("story", story)?;
        let branch = branch_name(epic, story);
        let path = self.folder(epic, story);
        // A branch a removal kept is ours: made again from it.
        let mut branch_ours = false;
        let mut record = match self.read_record(epic, story)? {
            Some(r) if r.state == WorktreeState::Removing => {
                self.finish_removal(&r)?;
                branch_ours = !r.delete_branch;
                None
            }
            other => other,
        };
        if record.is_none() {
            // Nothing of ours: a branch or a folder already there belongs to someone else.
            if !branch_ours && self.resolve(&format!("refs/heads/{branch}"))?.is_some() {
                return Err(EpicError::failure(
                    "EPIC_WORKTREE_BRANCH_EXISTS",
                    format!("branch {branch} exists and baton did not make it"),
                )
                .hint(format!(
                    "delete or rename it (git branch -m {branch} <other>) and run again"
                )));
            }
            if path.symlink_metadata().is_ok() {
                return Err(EpicError::failure(
                    "EPIC_WORKTREE_PATH_TAKEN",
                    format!("{} exists and baton did not make it", path.display()),
                )
                .hint("move it away and run again"));
            }
            let base = self.resolve(base)?.ok_or_else(|| {
                EpicError::failure(
                    "EPIC_GIT_FAILED",
                    format!("the base {base} of story {story} is not a commit"),
                )
            })?;
            let new = WorktreeRecord {
                version: 1,
                epic: epic.to_string(),
                story: story.to_string(),
                branch: branch.clone(),
                base,
                path: path.clone(),
                state: WorktreeState::Creating,
                admin: None,
                delete_branch: false,
                kept: None,
                merge: None,
                created_at: now(),
            };
            self.write_record(&new)?;
            record = Some(new);
        }
        let Some(mut record) = record else {
            return Err(EpicError::failure("EPIC_INTERNAL", "no worktree record"));
        };
        if record.branch != branch || record.path != path {
            return Err(EpicError::failure(
                "EPIC_WORKTREE_RECORD_INVALID",
                format!(
                    "the worktree record of {story} names branch {} at {}, not {branch} at {}",
                    record.branch,
                    record.path.display(),
                    path.display()
                ),
            ));
        }
        // Adopt what is there when it is whole.
        if let Some(wt) = self.whole(&record)? {
            if record.state != WorktreeState::Ready
                || record.kept.is_some()
                || record.admin.is_none()
            {
                record.state = WorktreeState::Ready;
                record.kept = None;
                record.admin = Some(admin_name(&wt.git_dir));
                self.write_record(&record)?;
            }
            return Ok(Worktree {
                record,
                git_dir: wt.git_dir,
            });
        }
        if record.state == WorktreeState::Ready {
            // A worktree that held a story's work is never thrown away here.
            let registered = self.registered()?;
            if let Some(entry) = registered.iter().find(|r| r.path == record.path) {
                return Err(damaged(&record, &entry.describe()));
            }
            if record.path.symlink_metadata().is_ok() {
                return Err(damaged(&record, "its folder is no longer a git worktree"));
            }
            // Nothing left of it: made again from its branch.
            record.state = WorktreeState::Creating;
            self.write_record(&record)?;
        }
        // Half made: take away what git left, then make it.
        self.clear_folder(&record)?;
        let has_branch = self.resolve(&format!("refs/heads/{branch}"))?.is_some();
        let shown = path.to_string_lossy().into_owned();
        if has_branch {
            self.git_main_ok(&["worktree", "add", "--quiet", &shown, &branch])?;
        } else {
            self.git_main_ok(&[
                "worktree",
                "add",
                "--quiet",
                "--no-track",
                "-b",
                &branch,
                &shown,
                &record.base,
            ])?;
        }
        record.state = WorktreeState::Ready;
        let Some(wt) = self.whole(&record)? else {
            return Err(damaged(&record, "git made it but it is not usable"));
        };
        record.kept = None;
        record.admin = Some(admin_name(&wt.git_dir));
        self.write_record(&record)?;
        Ok(Worktree {
            record,
            git_dir: wt.git_dir,
        })
    }

    /// The worktree of a record if git has it whole: registered at its folder on its branch
    /// (or detached, once ready), its folder there, and (for a record still `creating`) not locked by a `git worktree
    /// add` that did not finish. A `.git` file changed in the worktree is written back.
    fn whole(&self, record: &WorktreeRecord) -> Result<Option<Worktree>> {
        let registered = self.registered()?;
        let Some(entry) = registered.iter().find(|r| r.path == record.path) else {
            return Ok(None);
        };
        let want = format!("refs/heads/{}", record.branch);
        let unfinished = record.state == WorktreeState::Creating && entry.locked.is_some();
        // A ready worktree may be detached for a moment (a rebase of a merge a kill
        // interrupted): the merge puts it back on its branch.
        let detached_ok = record.state == WorktreeState::Ready && entry.branch.is_none();
        let on_branch =
            (entry.branch.as_deref() == Some(want.as_str()) || detached_ok) && entry.head.is_some();
        let folder = record.path.symlink_metadata().is_ok_and(|m| m.is_dir());
        if unfinished || !on_branch || !folder {
            return Ok(None);
        }
        let Some(git_dir) = self.admin_for(&record.path)? else {
            return Ok(None);
        };
        let dot_git = record.path.join(".git");
        let want_text = format!("gitdir: {}\n", git_dir.display());
        let is_dir = dot_git.symlink_metadata().is_ok_and(|m| m.is_dir());
        if is_dir {
            return Ok(None);
        }
        if read_small(&dot_git, 4096).as_deref() != Some(want_text.as_str()) {
            let _ = std::fs::remove_file(&dot_git);
            std::fs::write(&dot_git, want_text).map_err(io("write", &dot_git))?;
        }
        Ok(Some(Worktree {
            record: record.clone(),
            git_dir,
        }))
    }

    /// The folder under `<.git>/worktrees/` whose `gitdir` names `path` back.
    fn admin_for(&self, path: &Path) -> Result<Option<PathBuf>> {
        let admin = self.common_dir.join("worktrees");
        let ours = path.join(".git");
        for name in sorted_names(&admin)? {
            let dir = admin.join(&name);
            let names_us = read_small(&dir.join("gitdir"), 4096)
                .is_some_and(|back| lexical(&dir.join(back.trim())) == ours);
            if names_us && dir.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                return Ok(Some(dir));
            }
        }
        Ok(None)
    }

    /// Takes away the worktree git has at a record's folder (registered or not), and the
    /// folder. Only for a record of ours: its folder is ours.
    fn clear_folder(&self, record: &WorktreeRecord) -> Result<()> {
        let shown = record.path.to_string_lossy().into_owned();
        let registered = self.registered()?;
        if let Some(entry) = registered.iter().find(|r| r.path == record.path) {
            if entry.locked.is_some() {
                let _ = self.git_main(&["worktree", "unlock", &shown]);
            }
            let out = self.git_main(&["worktree", "remove", "--force", "--force", &shown])?;
            if !out.ok() {
                // Its folder is gone or no longer a worktree: take away git's entry directly
                // (what `git worktree prune` does, for this one only).
                self.remove_admin_of(record)?;
            }
        } else {
            self.remove_admin_of(record)?;
        }
        remove_tree(&record.path)
    }

    /// Removes the folders under `<.git>/worktrees/` that name this record's folder.
    fn remove_admin_of(&self, record: &WorktreeRecord) -> Result<()> {
        let admin = self.common_dir.join("worktrees");
        let ours = record.path.join(".git");
        for name in sorted_names(&admin)? {
            let dir = admin.join(&name);
            let names_us = read_small(&dir.join("gitdir"), 4096)
                .is_some_and(|back| lexical(&dir.join(back.trim())) == ours);
            if names_us {
                remove_tree(&dir)?;
            }
        }
        Ok(())
    }

    /// The worktree of a story, whole and recorded ready; `None` when there is none.
    pub fn get(&self, epic: &str, story: &str) -> Result<Option<Worktree>> {
        let Some(record) = self.read_record(epic, story)? else {
            return Ok(None);
        };
        if record.state != WorktreeState::Ready {
            return Ok(None);
        }
        self.whole(&record)
    }

    /// Keeps a paused or failed story's worktree for inspection and resume.
    pub fn keep(&self, epic: &str, story: &str, reason: &str) -> Result<()> {
        let Some(mut record) = self.read_record(epic, story)? else {
            return Ok(());
        };
        record.kept = Some(Kept {
            reason: reason.to_string(),
            at: now(),
        });
        self.write_record(&record)
    }

    /// Removes a story's worktree (and its branch with `delete_branch`, for a story merged
    /// onto the epic's branch), then its record. Idempotent; a kill at any point is finished
    /// by the next call or by [`Worktrees::recover`].
    pub fn remove(&self, epic: &str, story: &str, delete_branch: bool) -> Result<()> {
        let Some(mut record) = self.read_record(epic, story)? else {
            return Ok(());
        };
        if record.state != WorktreeState::Removing || record.delete_branch != delete_branch {
            record.state = WorktreeState::Removing;
            record.delete_branch = delete_branch;
            self.write_record(&record)?;
        }
        self.finish_removal(&record)
    }

    fn finish_removal(&self, record: &WorktreeRecord) -> Result<()> {
        self.clear_folder(record)?;
        if record.delete_branch {
            let full = format!("refs/heads/{}", record.branch);
            if self.resolve(&full)?.is_some() {
                self.git_main_ok(&["update-ref", "-d", &full])?;
            }
        }
        self.delete_record(&record.epic, &record.story)
    }

    /// After a restart: finishes the removals a kill interrupted and returns the records left
    /// (creations are finished by [`Worktrees::create`] when their story goes on).
    pub fn recover(&self) -> Result<Vec<WorktreeRecord>> {
        let mut left = Vec::new();
        for record in self.records()? {
            if record.state == WorktreeState::Removing {
                self.finish_removal(&record)?;
            } else {
                left.push(record);
            }
        }
        Ok(left)
    }

    /// Every record under the root (epic folder by epic folder, in name order).
    pub fn records(&self) -> Result<Vec<WorktreeRecord>> {
        records_in(&self.root, None)
    }

    /// Every worktree under the root: the recorded ones with what git says of them, and those
    /// git has there without a record.
    pub fn list(&self) -> Result<Vec<Listed>> {
        let registered = self.registered()?;
        let mut out = Vec::new();
        for record in self.records()? {
            let live = match registered.iter().find(|r| r.path == record.path) {
                None => Live::Absent,
                Some(entry) => match self.whole(&record)? {
                    Some(_) => Live::Ready {
                        head: entry.head.clone().unwrap_or_default(),
                    },
                    None => Live::Damaged(entry.describe()),
                },
            };
            out.push(Listed {
                path: record.path.clone(),
                record: Some(record),
                live,
            });
        }
        for entry in registered {
            let ours = out.iter().any(|l| l.path == entry.path);
            if !ours && entry.path.starts_with(&self.root) {
                out.push(Listed {
                    record: None,
                    live: Live::Damaged(entry.describe()),
                    path: entry.path,
                });
            }
        }
        Ok(out)
    }
}

fn damaged(record: &WorktreeRecord, what: &str) -> EpicError {
    EpicError::failure(
        "EPIC_WORKTREE_DAMAGED",
        format!(
            "the worktree of story {} ({}) is damaged: {what}",
            record.story,
            record.path.display()
        ),
    )
    .hint(format!(
        "its work is on branch {}; inspect the folder, then remove it (git worktree remove --force) and resume",
        record.branch
    ))
}

/// `path` with `.` and `..` folded (git may write a worktree's links relative).
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn admin_name(git_dir: &Path) -> String {
    git_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read_small(path: &Path, limit: u64) -> Option<String> {
    use std::io::Read;
    let meta = path.symlink_metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(limit)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The records under `root` (of `epic` only, when given), epic folder by epic folder, in name
/// order; none when `root` does not exist. Reads only: what `baton epic status` shows.
pub fn records_in(root: &Path, epic: Option<&str>) -> Result<Vec<WorktreeRecord>> {
    let mut out = Vec::new();
    for name in sorted_names(root)? {
        if epic.is_some_and(|e| e != name) {
            continue;
        }
        let dir = root.join(&name);
        if !dir.is_dir() || check_name("epic", &name).is_err() {
            continue;
        }
        for file in sorted_names(&dir)? {
            if file.strip_suffix(RECORD_SUFFIX).is_none() {
                continue;
            }
            if let Some(r) = read_record_at(&dir.join(&file))? {
                out.push(r);
            }
        }
    }
    Ok(out)
}

fn read_record_at(path: &Path) -> Result<Option<WorktreeRecord>> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("read", path)(e)),
    };
    let mut bytes = Vec::new();
    file.take(RECORD_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(io("read", path))?;
    let shown = path.display().to_string();
    if bytes.len() as u64 > RECORD_LIMIT {
        return Err(EpicError::invalid_file(
            "EPIC_WORKTREE_RECORD_INVALID",
            &shown,
            None,
            format!("is larger than {RECORD_LIMIT} bytes"),
        ));
    }
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        EpicError::invalid_file(
            "EPIC_WORKTREE_RECORD_INVALID",
            &shown,
            None,
            format!("line {} column {}: {e}", e.line(), e.column()),
        )
        .hint("remove the record and the worktree next to it (git worktree remove), then resume")
    })
}

fn sorted_names(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("list", dir)(e)),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .take(MAX_LISTED)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

/// Removes a folder and what it holds without following links; a missing one is fine.
fn remove_tree(path: &Path) -> Result<()> {
    match path.symlink_metadata() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io("inspect", path)(e)),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path).map_err(io("remove", path)),
        Ok(_) => std::fs::remove_file(path).map_err(io("remove", path)),
    }
}

/// One entry of `git worktree list --porcelain -z`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Registered {
    path: PathBuf,
    head: Option<String>,
    branch: Option<String>,
    locked: Option<String>,
    prunable: Option<String>,
}

impl Registered {
    fn describe(&self) -> String {
        if let Some(l) = &self.locked {
            return format!("locked ({l})");
        }
        if let Some(p) = &self.prunable {
            return format!("prunable ({p})");
        }
        match &self.branch {
            Some(b) => format!("on {b}"),
            None => "detached".to_string(),
        }
    }
}

fn parse_porcelain(text: &str) -> Vec<Registered> {
    let mut out = Vec::new();
    let mut cur: Option<Registered> = None;
    for field in text.split('\0') {
        if field.is_empty() {
            if let Some(r) = cur.take() {
                out.push(r);
            }
            continue;
        }
        let (key, value) = field.split_once(' ').unwrap_or((field, ""));
        match key {
            "worktree" => {
                if let Some(r) = cur.take() {
                    out.push(r);
                }
                cur = Some(Registered {
                    path: PathBuf::from(value),
                    ..Registered::default()
                });
            }
            "HEAD" => {
                if let Some(r) = cur.as_mut() {
                    r.head = Some(value.to_string());
                }
            }
            "branch" => {
                if let Some(r) = cur.as_mut() {
                    r.branch = Some(value.to_string());
                }
            }
            "locked" => {
                if let Some(r) = cur.as_mut() {
                    r.locked = Some(value.to_string());
                }
            }
            "prunable" => {
                if let Some(r) = cur.as_mut() {
                    r.prunable = Some(value.to_string());
                }
            }
            _ => {}
        }
    }
    if let Some(r) = cur.take() {
        out.push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("story", "1-2-user-auth").is_ok());
        assert!(check_name("story", "1-2a-x.y_z").is_ok());
        for bad in ["", "-x", ".x", "a..b", "a/b", "a b", "x.lock", "é"] {
            assert_eq!(
                check_name("story", bad).unwrap_err().code,
                "EPIC_WORKTREE_NAME_INVALID",
                "{bad:?}"
            );
        }
        assert_eq!(branch_name("epic-1", "1-2-x"), "baton/epic-1/1-2-x");
    }

    #[test]
    fn porcelain_is_read() {
        let text = "worktree /p\0HEAD abc\0branch refs/heads/main\0\0worktree /w/epic-1/1-1-a\0HEAD def\0branch refs/heads/baton/epic-1/1-1-a\0locked initializing\0\0worktree /w/x\0HEAD 123\0detached\0prunable gitdir file points to non-existent location\0\0";
        let r = parse_porcelain(text);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].branch.as_deref(), Some("refs/heads/main"));
        assert_eq!(r[1].locked.as_deref(), Some("initializing"));
        assert!(r[2].prunable.is_some());
        assert_eq!(
            r[2].describe(),
            "prunable (gitdir file points to non-existent location)"
        );
    }

    #[test]
    fn tails_are_bounded() {
        assert_eq!(tail("  short ", 10), "short");
        let t = tail(&"é".repeat(100), 11);
        assert!(t.len() <= 11 + "…".len());
        assert!(t.starts_with('…'));
    }
}
