//! `[autopilot.publish]` in the loop: an approved story is recorded in the publish ledger the
//! moment its commit exists (sequential mode: the commit in place; parallel mode: its commit on
//! the epic's branch), then pushed on its own branch `baton/<epic>/<story>` and the operator's
//! command run (see [`baton_worktree::publish`] for how). With `done_when = "merged"` the story
//! stays `review` in sprint-status.yaml, held (not run again, its dependants wait), until the
//! remote's base branch contains its commit: asked on `epic run`/`resume`, every
//! [`CHECK_EVERY_S`] while the loop runs, and on `epic status`.
//!
//! A failed push or command never loses the story: it is kept approved-but-unpublished with its
//! error on the board, and published again on the next resume (or check).

use crate::config::AutopilotConfig;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::events::EpicEvent;
use baton_bmad::layout::{self, Layout};
use baton_bmad::sprint::{self, SprintStatus};
use baton_epic_state::lock;
use baton_worktree::publish::{self, Ledger, State, Story, Target};
use std::path::Path;
use std::time::Duration;

/// Seconds between two questions to the remote while the loop runs.
pub const CHECK_EVERY_S: u64 = 180;

fn now_s() -> u64 {
    crate::progress::now_ms() / 1000
}

fn target<'a>(config: &'a AutopilotConfig, project: &'a Path) -> Target<'a> {
    Target {
        project,
        remote: &config.publish.remote,
        command: config.publish.command.as_deref(),
        timeout: Duration::from_secs(config.publish.command_timeout_s),
    }
}

impl Ctx<'_> {
    /// Records approved story `key`, whose commit is `commit` on branch `base`, for publishing
    /// (nothing without `push`). Whether the story is done now (else it waits for its merge).
    pub(crate) fn publish_record(&self, key: &str, commit: &str, base: &str) -> Result<bool> {
        let p = &self.config.publish;
        if !p.push {
            return Ok(true);
        }
        let text = match self.stories {
            Some(_) => self.stories_story_text(key),
            None => self.story_text(key),
        };
        let message = baton_worktree::git::commit_message(key, text.as_deref());
        let title = message
            .strip_prefix(&format!("story {key}: "))
            .unwrap_or(&message);
        let epic = self.progress.epic_id.clone();
        let mut ledger = Ledger::load(&self.layout.dir)?;
        ledger.record(Story {
            story: key.to_string(),
            branch: baton_worktree::worktree::branch_name(&epic, key),
            epic,
            title: title.to_string(),
            base: base.to_string(),
            commit: commit.to_string(),
            state: State::Approved,
            wait_merge: p.waits_for_merge(),
            command: None,
            url: None,
            error: None,
        });
        ledger.save(&self.layout.dir)?;
        Ok(!p.waits_for_merge())
    }

    /// Sequential mode: the story's commit is the project's `HEAD`, on the branch it is on.
    pub(crate) fn publish_head(&self, key: &str) -> Result<bool> {
        if !self.config.publish.push {
            return Ok(true);
        }
        let project = &self.layout.project;
        let commit = baton_worktree::git::head(project)?;
        let out =
            baton_worktree::git::run(project, &[], &["symbolic-ref", "--short", "HEAD"], &[])?;
        let base = match out.ok() {
            true => out.stdout.trim().to_string(),
            false => String::new(),
        };
        self.publish_record(key, &commit, &base)
    }

    /// Publishes what is recorded and not published yet (`only`: that story alone), then, when
    /// `force` or every [`CHECK_EVERY_S`], asks the remote which held stories are merged and
    /// marks them done. A failure is the story's (on the board, retried), never the loop's.
    pub(crate) fn publish_catch_up(&self, only: Option<&str>, force: bool) -> Result<()> {
        // A story's own loop in its worktree never publishes (its orchestrator does).
        if !self.config.publish.push {
            return Ok(());
        }
        let mut ledger = Ledger::load(&self.layout.dir)?;
        if ledger.stories.is_empty() {
            return Ok(());
        }
        let due = force || now_s().saturating_sub(ledger.checked_at) >= CHECK_EVERY_S;
        if only.is_none() && !due {
            return Ok(());
        }
        let t = target(&self.config, &self.layout.project);
        for i in 0..ledger.stories.len() {
            let s = &mut ledger.stories[i];
            if !s.unpublished() || only.is_some_and(|k| k != s.story) {
                continue;
            }
            match publish::publish(&t, s) {
                Ok(()) => self.emit(EpicEvent::Note(format!(
                    "{}: published on {} ({}){}",
                    s.story,
                    s.branch,
                    t.remote,
                    s.url.as_ref().map(|u| format!(": {u}")).unwrap_or_default()
                ))),
                Err(e) => self.emit(EpicEvent::Note(format!(
                    "{}: approved, not published: {}: {}{}",
                    s.story,
                    e.code,
                    e.message,
                    e.hint.map(|h| format!(" (hint: {h})")).unwrap_or_default()
                ))),
            }
            // Saved after each story: a command that ran is never run again.
            ledger.save(&self.layout.dir)?;
        }
        if due {
            for key in publish::check_merges(&mut ledger, &self.layout.project, t.remote, now_s()) {
                self.raise(&key, "done")?;
            }
            ledger.save(&self.layout.dir)?;
        }
        Ok(())
    }

    /// Stories recorded as published that are not done until merged.
    pub(crate) fn publish_holding(&self) -> Vec<String> {
        Ledger::load(&self.layout.dir)
            .map(|l| l.holding().map(|s| s.story.clone()).collect())
            .unwrap_or_default()
    }

    /// Says which stories wait for their merge (the epic ends without them).
    pub(crate) fn note_waiting_merges(&self) {
        let held = self.publish_holding();
        if !held.is_empty() {
            self.emit(EpicEvent::Note(format!(
                "waiting for their merge on {}: {}; `baton epic status` checks, `baton epic resume` goes on",
                self.config.publish.remote,
                held.join(", ")
            )));
        }
    }
}

/// `baton epic status`: asks the remote about the project's held stories and marks those
/// merged `done` in sprint-status.yaml. Nothing when no loop could be writing (a running loop
/// checks itself) — the project's lock is taken for the check.
pub fn check_merges(project: &Path) -> Result<Vec<String>> {
    let root =
        std::fs::canonicalize(project).map_err(crate::error::EpicError::io("open", project))?;
    let config = AutopilotConfig::load(&root)?;
    let layout: Layout = layout::resolve(&root, config.implementation_artifacts.as_deref())?;
    if !config.publish.push || !layout.dir.is_open() || lock::is_held(&layout.dir) {
        return Ok(Vec::new());
    }
    let mut ledger = Ledger::load(&layout.dir)?;
    if ledger.holding().next().is_none() {
        return Ok(Vec::new());
    }
    let Ok(_lock) = lock::acquire(&layout.dir, &layout.rel) else {
        return Ok(Vec::new());
    };
    let merged = publish::check_merges(&mut ledger, &root, &config.publish.remote, now_s());
    if !merged.is_empty() {
        let mut s = SprintStatus::load(
            &layout.file(sprint::FILE_NAME),
            &layout.rel_file(sprint::FILE_NAME),
        )?;
        let mut changed = false;
        for key in &merged {
            changed |= s.raise(key, "done", &crate::progress::now())?;
        }
        if changed {
            s.save()?;
        }
    }
    ledger.save(&layout.dir)?;
    Ok(merged)
}
