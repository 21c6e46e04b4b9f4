//! `--parallel`: an approved story's branch is brought onto the epic's branch (the branch the
//! project was on), one story at a time, in approval order:
//!
//! 1. **commit**: everything the story changed in its worktree becomes one commit on the
//!    epic's current tip's side: `story <key>: <title>`, as in sequential mode (commits the
//!    phases made are folded in; `keep_out` paths, the orchestrator's own files, are left out
//!    and put back as they were, so the worktree is clean);
//! 2. **rebase** that commit onto the epic branch's current tip, *in the story's worktree*
//!    (the main work tree is never touched by a rebase). A conflict is aborted at once, and
//!    the worktree is put on the tip with the story's changes applied and the conflicts
//!    marked (`git merge --squash`: no merge or rebase left in progress) for the developer;
//! 3. **verify**: the `[autopilot.verify]` commands run on the result, in the worktree,
//!    confined like every verify command;
//! 4. **advance** the epic's branch: the main work tree's files of `carry` (the orchestrator's
//!    files, committed with each story as in sequential mode) are added to the commit, then
//!    `git update-ref <branch> <new> <old>` moves the branch only if it is still where the
//!    rebase left it (compare-and-swap), then the main work tree follows.
//!
//! **Why update-ref + `git restore` of the changed paths, not `git merge --ff-only`.** The main
//! work tree is where the orchestrator writes `sprint-status.yaml`: it is never clean, so a
//! "only when clean" fast-forward would never run. `merge --ff-only` (like `read-tree -m -u`)
//! leaves a killed checkout half done with an `index.lock` and files it refuses to overwrite
//! afterwards ("not uptodate"), and nothing records which files were its own. Here the files
//! that change are exactly `git diff --name-only <old> <new>`; before anything moves, each must
//! be unmodified in the main work tree (else the merge is refused as [`MergeOutcome::Blocked`],
//! nothing changed); then the branch moves (one atomic ref update) and `git restore
//! --source=<new> --staged --worktree -- <those paths>` brings the index and the files there.
//! A kill anywhere in that last step is finished by running the same restore again: it
//! overwrites whatever half state it left, and touches no other path (the orchestrator's
//! modified files and the user's other changes stay).
//!
//! **Crash safety.** Each step is recorded in the worktree's record (written durably) before
//! it starts. Calling [`merge_story`] again after a kill finishes the merge or rolls it back:
//! a rebase left in progress is aborted and retried, an interrupted conflict set-up is redone,
//! an interrupted verify runs again, an interrupted advance is finished, a finished merge
//! answers [`MergeOutcome::Merged`] again. git lock files a killed git left (older than
//! [`MergeSettings::started`]) are removed first.

use super::error::{EpicError, Result};
use super::verify::{self, CommandResult, Verdict};
use super::worktree::{self, Worktree, Worktrees};
use baton_tools::{TerminalRuntime, TerminalSettings};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// Bytes of a conflict's message kept for the developer.
pub const CONFLICT_TAIL: usize = 4000;
/// Paths given to one git command at most (the rest in further commands).
const PATHS_PER_COMMAND: usize = 500;
/// Times the merge starts over when the epic's branch moved under it.
const MAX_RESTARTS: usize = 3;

pub use crate::worktree::MergeStep;

/// How a merge ended.
#[derive(Debug, Clone)]
pub enum MergeOutcome {
    /// The epic's branch is at `commit`, one commit on the tip before; the main work tree has it.
    Merged { commit: String },
    /// The story conflicts with the tip: its worktree is on the tip with the story's changes
    /// applied and conflicts marked in `files`, for the developer (`tail`: git's message).
    Conflict { files: Vec<String>, tail: String },
    /// A verify command failed on the rebased story (its worktree stays rebased).
    CheckFailed { result: CommandResult },
    /// The main work tree has changes of its own in files the story changes: nothing moved.
    Blocked { files: Vec<String> },
    /// Cancelled during verify; calling again runs verify again.
    Interrupted,
}

/// What a merge needs besides the worktree.
pub struct MergeSettings<'a> {
    /// The epic's branch (`main`, not `refs/heads/main`).
    pub branch: &'a str,
    /// The story's commit message (see [`super::git::commit_message`]).
    pub message: &'a str,
    /// Project-relative paths the story's commit leaves out (the worktree's copies of the
    /// orchestrator's files: `sprint-status.yaml`, the loop's state files).
    pub keep_out: &'a [String],
    /// Project-relative paths of the main work tree committed with the story (the
    /// orchestrator's files, as sequential mode commits them).
    pub carry: &'a [String],
    /// `[autopilot.verify]`
    pub verify_commands: &'a [String],
    pub verify_timeout: Duration,
    /// The project's `[tools.terminal]` settings (verify runs confined with them).
    pub terminal: &'a TerminalSettings,
    /// Where verify commands must not look (the store).
    pub runtime: TerminalRuntime,
    pub cancel: &'a CancellationToken,
    /// When this process started: a git lock file older than this was left by a killed git.
    pub started: SystemTime,
}

/// Brings the approved story's branch onto the epic's branch (see the module's documentation).
/// Call it again after a kill, with the same settings, to finish or roll back.
pub fn merge_story(
    wts: &Worktrees,
    epic: &str,
    story: &str,
    s: &MergeSettings<'_>,
    on_verify: &mut dyn FnMut(&CommandResult),
) -> Result<MergeOutcome> {
    let Some(wt) = wts.get(epic, story)? else {
        return Err(EpicError::failure(
            "EPIC_WORKTREE_MISSING",
            format!("story {story} has no worktree to merge"),
        ));
    };
    let m = Merge { wts, wt, s };
    let advancing = matches!(m.step()?, Some(MergeStep::Advancing { .. }));
    m.clear_stale_locks(advancing)?;
    for _ in 0..MAX_RESTARTS {
        if let Some(outcome) = m.attempt(on_verify)? {
            return Ok(outcome);
        }
    }
    Err(EpicError::failure(
        "EPIC_MERGE_BRANCH_MOVING",
        format!(
            "branch {} kept moving while story {story} was merged onto it",
            s.branch
        ),
    )
    .hint("something else commits on the epic's branch; let the epic finish, then resume"))
}

struct Merge<'a> {
    wts: &'a Worktrees,
    wt: Worktree,
    s: &'a MergeSettings<'a>,
}

impl Merge<'_> {
    fn branch_ref(&self) -> String {
        format!("refs/heads/{}", self.s.branch)
    }

    fn story(&self) -> &str {
        &self.wt.record.story
    }

    /// Records the merge's step (durably) before it runs.
    fn record(&self, step: Option<MergeStep>) -> Result<()> {
        let mut record = self
            .wts
            .read_record(&self.wt.record.epic, &self.wt.record.story)?
            .unwrap_or_else(|| self.wt.record.clone());
        record.merge = step;
        self.wts.write_record(&record)
    }

    fn step(&self) -> Result<Option<MergeStep>> {
        Ok(self
            .wts
            .read_record(&self.wt.record.epic, &self.wt.record.story)?
            .and_then(|r| r.merge))
    }

    fn tip(&self) -> Result<String> {
        self.wts.resolve(&self.branch_ref())?.ok_or_else(|| {
            EpicError::failure(
                "EPIC_GIT_FAILED",
                format!("the epic's branch {} does not exist", self.s.branch),
            )
        })
    }

    fn head(&self) -> Result<String> {
        Ok(self
            .wts
            .git_in_ok(&self.wt, &["rev-parse", "HEAD"])?
            .trim()
            .to_string())
    }

    /// One pass; `None` when the epic's branch moved and the merge starts over.
    fn attempt(&self, on_verify: &mut dyn FnMut(&CommandResult)) -> Result<Option<MergeOutcome>> {
        match self.step()? {
            Some(MergeStep::Merged { commit }) => {
                return Ok(Some(MergeOutcome::Merged { commit }));
            }
            Some(MergeStep::Advancing { tip, commit }) => return self.advance(&tip, &commit),
            Some(MergeStep::Conflict {
                tip,
                story,
                files,
                tail,
            }) => {
                self.settle_worktree()?;
                return self.conflict(&tip, &story, files, tail).map(Some);
            }
            Some(MergeStep::Verifying { tip, rebased }) => {
                self.settle_worktree()?;
                if self.head()? == rebased && self.tip()? == tip {
                    return self.verify_then_advance(&tip, &rebased, on_verify);
                }
            }
            Some(MergeStep::Rebasing { .. }) | None => self.settle_worktree()?,
        }
        // From the start: commit, rebase, verify, advance.
        let tip = self.tip()?;
        let story_commit = self.commit_story(&tip)?;
        let base = self.merge_base(&story_commit, &tip)?;
        if base != tip {
            self.record(Some(MergeStep::Rebasing {
                tip: tip.clone(),
                story: story_commit.clone(),
            }))?;
            let out = self.wts.git_in(
                &self.wt,
                &[
                    "rebase",
                    "--quiet",
                    "--no-autosquash",
                    "--reapply-cherry-picks",
                    "--onto",
                    &tip,
                    &base,
                ],
            )?;
            if !out.ok() {
                let text = format!("{}\n{}", out.stdout.trim(), out.stderr.trim());
                let message = worktree::tail(&self.scrub(&text), CONFLICT_TAIL);
                if !self.rebase_in_progress() {
                    // Refused before it began (nothing changed in the worktree).
                    self.record(None)?;
                    return Ok(Some(MergeOutcome::Conflict {
                        files: Vec::new(),
                        tail: message,
                    }));
                }
                let files = self.unmerged()?;
                self.record(Some(MergeStep::Conflict {
                    tip: tip.clone(),
                    story: story_commit.clone(),
                    files: files.clone(),
                    tail: message.clone(),
                }))?;
                self.settle_worktree()?;
                return self.conflict(&tip, &story_commit, files, message).map(Some);
            }
        }
        let rebased = self.head()?;
        self.record(Some(MergeStep::Verifying {
            tip: tip.clone(),
            rebased: rebased.clone(),
        }))?;
        self.verify_then_advance(&tip, &rebased, on_verify)
    }

    /// Text for the developer names no host path: the worktree reads `@project`, the
    /// repository `<repository>`, the worktrees' root `<worktrees>`.
    fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        let names = [
            (self.wt.path().to_path_buf(), "@project"),
            (self.wt.git_dir.clone(), "<repository>"),
            (self.wts.common_dir().to_path_buf(), "<repository>"),
            (self.wts.root().to_path_buf(), "<worktrees>"),
            (self.wts.project().to_path_buf(), "<repository>"),
        ];
        for (path, name) in names {
            out = out.replace(path.to_string_lossy().as_ref(), name);
        }
        out
    }

    fn merge_base(&self, a: &str, b: &str) -> Result<String> {
        Ok(self
            .wts
            .git_in_ok(&self.wt, &["merge-base", a, b])?
            .trim()
            .to_string())
    }

    /// Everything the story changed becomes one commit on the story's fork point from `tip`
    /// (idempotent: a commit already made that way, with nothing left to add, is kept).
    fn commit_story(&self, tip: &str) -> Result<String> {
        self.wts.git_in_ok(&self.wt, &["add", "-A"])?;
        let head = self.head()?;
        let base = self.merge_base(&head, tip)?;
        let message = self.s.message;
        if head != base {
            let parent = self
                .wts
                .git_in(&self.wt, &["rev-parse", "--verify", "-q", "HEAD^"])?
                .stdout
                .trim()
                .to_string();
            let subject = self
                .wts
                .git_in_ok(&self.wt, &["log", "-1", "--format=%s"])?
                .trim()
                .to_string();
            if parent == base && subject == message && self.clean()? {
                return Ok(head);
            }
            self.wts
                .git_in_ok(&self.wt, &["reset", "-q", "--soft", &base])?;
        }
        for chunk in self.s.keep_out.chunks(PATHS_PER_COMMAND) {
            let mut args = vec!["reset", "-q", base.as_str(), "--"];
            args.extend(chunk.iter().map(String::as_str));
            self.wts.git_in_ok(&self.wt, &args)?;
        }
        // A repository without an identity commits as baton (baton-git's fallback), as the
        // sequential mode does.
        self.wts.git_in_ok(
            &self.wt,
            &[
                "commit",
                "-q",
                "--allow-empty",
                "--no-verify",
                "-m",
                message,
            ],
        )?;
        self.put_back_kept_out()?;
        self.head()
    }

    /// The worktree's copies of `keep_out` go back to the commit's (so the worktree is clean).
    fn put_back_kept_out(&self) -> Result<()> {
        for chunk in self.s.keep_out.chunks(PATHS_PER_COMMAND) {
            let mut args = vec!["ls-files", "-z", "--"];
            args.extend(chunk.iter().map(String::as_str));
            let tracked = self.wts.git_in_ok(&self.wt, &args)?;
            let tracked: Vec<&str> = tracked.split('\0').filter(|p| !p.is_empty()).collect();
            for part in tracked.chunks(PATHS_PER_COMMAND) {
                let mut args = vec!["checkout", "-q", "HEAD", "--"];
                args.extend(part.iter().copied());
                self.wts.git_in_ok(&self.wt, &args)?;
            }
            let mut args = vec!["clean", "-f", "-d", "-q", "--"];
            args.extend(chunk.iter().map(String::as_str));
            self.wts.git_in_ok(&self.wt, &args)?;
        }
        Ok(())
    }

    /// Whether the worktree has nothing to commit (untracked files count).
    fn clean(&self) -> Result<bool> {
        let out = self.wts.git_in_ok(
            &self.wt,
            &["status", "--porcelain", "-z", "--untracked-files=all"],
        )?;
        Ok(out.is_empty())
    }

    fn rebase_in_progress(&self) -> bool {
        self.wt.git_dir.join("rebase-merge").exists()
            || self.wt.git_dir.join("rebase-apply").exists()
    }

    fn unmerged(&self) -> Result<Vec<String>> {
        let out = self
            .wts
            .git_in_ok(&self.wt, &["diff", "--name-only", "-z", "--diff-filter=U"])?;
        Ok(out
            .split('\0')
            .filter(|p| !p.is_empty())
            .take(1000)
            .map(str::to_string)
            .collect())
    }

    /// Leaves the worktree on its branch with no rebase in progress: a rebase a kill
    /// interrupted is aborted (the branch goes back to the story's commit), a HEAD left
    /// detached goes back to the branch.
    fn settle_worktree(&self) -> Result<()> {
        if self.rebase_in_progress() {
            let out = self.wts.git_in(&self.wt, &["rebase", "--abort"])?;
            if !out.ok() && self.rebase_in_progress() {
                // Its state cannot be read back: `--quit` forgets it, the branch never moved.
                self.wts.git_in_ok(&self.wt, &["rebase", "--quit"])?;
            }
        }
        let on = self
            .wts
            .git_in(&self.wt, &["symbolic-ref", "-q", "HEAD"])?
            .stdout
            .trim()
            .to_string();
        let want = format!("refs/heads/{}", self.wt.record.branch);
        if on != want {
            self.wts
                .git_in_ok(&self.wt, &["symbolic-ref", "HEAD", &want])?;
            self.wts.git_in_ok(&self.wt, &["reset", "-q", "--hard"])?;
        }
        Ok(())
    }

    /// Puts the worktree on `tip` with the changes of `story_commit` applied and conflicts
    /// marked, then forgets the step. Redone whole after a kill (nothing else has touched the
    /// worktree since the step was recorded).
    fn conflict(
        &self,
        tip: &str,
        story_commit: &str,
        files: Vec<String>,
        tail: String,
    ) -> Result<MergeOutcome> {
        self.wts
            .git_in_ok(&self.wt, &["reset", "-q", "--hard", tip])?;
        // Exit 1 with conflicts; the changes and the markers are left, no merge in progress.
        let out = self.wts.git_in(
            &self.wt,
            &["merge", "--squash", "--no-commit", "--quiet", story_commit],
        )?;
        if out.code.is_none_or(|c| c > 1) {
            return Err(EpicError::failure(
                "EPIC_GIT_FAILED",
                format!(
                    "git merge --squash in the worktree of {} failed: {}",
                    self.story(),
                    worktree::tail(&out.stderr, 2000)
                ),
            ));
        }
        self.record(None)?;
        Ok(MergeOutcome::Conflict { files, tail })
    }

    fn verify_then_advance(
        &self,
        tip: &str,
        rebased: &str,
        on_verify: &mut dyn FnMut(&CommandResult),
    ) -> Result<Option<MergeOutcome>> {
        if !self.s.verify_commands.is_empty() {
            let sandbox = verify::Sandbox::new(
                self.wt.path(),
                self.s.terminal,
                false,
                self.s.runtime.clone(),
            )
            .map_err(|(_, message)| {
                EpicError::failure("SANDBOX_SETUP_FAILED", message).hint("run `baton doctor`")
            })?;
            let failed = verify::run_all(
                self.s.verify_commands,
                &sandbox,
                self.s.verify_timeout,
                self.s.cancel,
                |r| on_verify(r),
            );
            if let Some(result) = failed {
                match &result.verdict {
                    Verdict::Cancelled => return Ok(Some(MergeOutcome::Interrupted)),
                    Verdict::Refused {
                        code,
                        message,
                        hint,
                    } => {
                        return Err(EpicError::failure(
                            code,
                            format!("verify command `{}` was not run: {message}", result.command),
                        )
                        .hint(hint.clone()));
                    }
                    _ => {
                        self.record(None)?;
                        let mut result = result;
                        result.tail = self.scrub(&result.tail);
                        return Ok(Some(MergeOutcome::CheckFailed { result }));
                    }
                }
            }
        }
        let commit = self.with_carry(tip, rebased)?;
        self.record(Some(MergeStep::Advancing {
            tip: tip.to_string(),
            commit: commit.clone(),
        }))?;
        self.advance(tip, &commit)
    }

    /// The rebased commit with the main work tree's `carry` files added (a new commit on
    /// `tip` with the same message), or the rebased commit itself when they add nothing.
    fn with_carry(&self, tip: &str, rebased: &str) -> Result<String> {
        if self.s.carry.is_empty() {
            return Ok(rebased.to_string());
        }
        let main_git = self.main_git_dir()?;
        let index = main_git.join("baton-merge.index");
        let _ = std::fs::remove_file(&index);
        let env = [
            ("GIT_INDEX_FILE", index.to_string_lossy().into_owned()),
            ("GIT_LITERAL_PATHSPECS", "1".to_string()),
        ];
        let run = |args: &[&str]| -> Result<String> {
            let mut all: Vec<&str> = worktree::GIT_SAFE.to_vec();
            all.extend_from_slice(args);
            let out = super::git::run(self.wts.project(), &[], &all, &env)?;
            if !out.ok() {
                return Err(EpicError::failure(
                    "EPIC_GIT_FAILED",
                    format!(
                        "git {} failed: {}",
                        args.first().copied().unwrap_or_default(),
                        worktree::tail(&out.stderr, 2000)
                    ),
                ));
            }
            Ok(out.stdout)
        };
        let result = (|| {
            run(&["read-tree", rebased])?;
            for path in self.s.carry {
                // One path at a time: a carried path that exists nowhere is not an error.
                let mut all: Vec<&str> = worktree::GIT_SAFE.to_vec();
                all.extend_from_slice(&["add", "-A", "--", path]);
                super::git::run(self.wts.project(), &[], &all, &env)?;
            }
            let tree = run(&["write-tree"])?.trim().to_string();
            let rebased_tree = run(&["rev-parse", &format!("{rebased}^{{tree}}")])?
                .trim()
                .to_string();
            if tree == rebased_tree {
                return Ok(rebased.to_string());
            }
            let args = ["commit-tree", &tree, "-p", tip, "-m", self.s.message];
            Ok(run(&args)?.trim().to_string())
        })();
        let _ = std::fs::remove_file(&index);
        result
    }

    fn main_git_dir(&self) -> Result<PathBuf> {
        let out = self.wts.git_main_ok(&["rev-parse", "--absolute-git-dir"])?;
        Ok(PathBuf::from(out.trim()))
    }

    /// Whether the main work tree has the epic's branch checked out.
    fn main_on_branch(&self) -> Result<bool> {
        let out = self.wts.git_main(&["symbolic-ref", "-q", "HEAD"])?;
        Ok(out.ok() && out.stdout.trim() == self.branch_ref())
    }

    fn changed_paths(&self, from: &str, to: &str) -> Result<Vec<String>> {
        let out = self.wts.git_main_ok(&[
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
            "--no-ext-diff",
            from,
            to,
        ])?;
        Ok(out
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect())
    }

    /// Moves the epic's branch from `tip` to `commit` (compare-and-swap) and brings the main
    /// work tree there; `None` when the branch moved elsewhere (the merge starts over).
    fn advance(&self, tip: &str, commit: &str) -> Result<Option<MergeOutcome>> {
        let branch = self.branch_ref();
        let on_branch = self.main_on_branch()?;
        let changed = self.changed_paths(tip, commit)?;
        let (carried, worked): (Vec<String>, Vec<String>) = changed
            .into_iter()
            .partition(|p| self.s.carry.iter().any(|c| c == p));
        let current = self.tip()?;
        if current == tip {
            if on_branch {
                let busy = self.modified_in_main(&worked)?;
                if !busy.is_empty() {
                    self.record(None)?;
                    return Ok(Some(MergeOutcome::Blocked { files: busy }));
                }
            }
            let reason = format!("baton: {}", self.s.message);
            let out = self
                .wts
                .git_main(&["update-ref", "-m", &reason, &branch, commit, tip])?;
            if !out.ok() && self.tip()? != commit {
                self.record(None)?;
                return Ok(None);
            }
        } else if current != commit {
            // Someone else moved the branch: start over from its new tip.
            self.record(None)?;
            return Ok(None);
        }
        if on_branch {
            self.restore(commit, &worked, true)?;
            self.restore(commit, &carried, false)?;
        }
        self.record(Some(MergeStep::Merged {
            commit: commit.to_string(),
        }))?;
        Ok(Some(MergeOutcome::Merged {
            commit: commit.to_string(),
        }))
    }

    /// Paths among `paths` the main work tree has changed (staged, unstaged or untracked).
    fn modified_in_main(&self, paths: &[String]) -> Result<Vec<String>> {
        let mut busy = Vec::new();
        for chunk in paths.chunks(PATHS_PER_COMMAND) {
            let mut args = vec![
                "status",
                "--porcelain",
                "-z",
                "--untracked-files=all",
                "--no-renames",
                "--",
            ];
            args.extend(chunk.iter().map(String::as_str));
            let out = self.wts.git_main_ok(&args)?;
            busy.extend(
                out.split('\0')
                    .filter(|e| e.len() > 3)
                    .map(|e| e[3..].to_string()),
            );
        }
        Ok(busy)
    }

    /// Index (and, with `files`, the files) of the main work tree at `commit` for `paths`.
    fn restore(&self, commit: &str, paths: &[String], files: bool) -> Result<()> {
        let source = format!("--source={commit}");
        for chunk in paths.chunks(PATHS_PER_COMMAND) {
            let mut args = vec!["restore", "-q", source.as_str(), "--staged"];
            if files {
                args.push("--worktree");
            }
            args.push("--");
            args.extend(chunk.iter().map(String::as_str));
            self.wts.git_main_ok(&args)?;
        }
        Ok(())
    }

    /// Removes the lock files a killed git left where this merge works, only those older
    /// than this process: the worktree's (it is ours alone) always; the main work tree's
    /// index and the epic branch's only when a kill interrupted the advance (the user may
    /// be running git there, an editor open on a commit).
    fn clear_stale_locks(&self, advancing: bool) -> Result<()> {
        let common = self.wts.common_dir();
        let mut locks: Vec<PathBuf> = vec![
            self.wt.git_dir.join("index.lock"),
            self.wt.git_dir.join("HEAD.lock"),
            common.join(format!("refs/heads/{}.lock", self.wt.record.branch)),
        ];
        if advancing {
            let main_git = self.main_git_dir()?;
            locks.push(main_git.join("index.lock"));
            locks.push(main_git.join("baton-merge.index.lock"));
            locks.push(common.join(format!("{}.lock", self.branch_ref())));
        }
        for lock in locks {
            remove_if_stale(&lock, self.s.started)?;
        }
        Ok(())
    }
}

fn remove_if_stale(path: &Path, started: SystemTime) -> Result<()> {
    let Ok(meta) = path.symlink_metadata() else {
        return Ok(());
    };
    let stale = meta.modified().is_ok_and(|t| t < started);
    if stale && meta.is_file() {
        std::fs::remove_file(path).map_err(EpicError::io("remove", path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_recorded_as_json() {
        let step = MergeStep::Advancing {
            tip: "a".into(),
            commit: "b".into(),
        };
        let text = serde_json::to_string(&step).unwrap();
        assert_eq!(text, r#"{"step":"advancing","tip":"a","commit":"b"}"#);
        assert_eq!(serde_json::from_str::<MergeStep>(&text).unwrap(), step);
        assert!(serde_json::from_str::<MergeStep>(r#"{"step":"flying"}"#).is_err());
    }
}
