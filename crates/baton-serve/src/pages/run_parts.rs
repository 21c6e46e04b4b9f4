//! What a run is part of: an epic story (a phase run the autopilot made, of a package or of the
//! project's own BMAD skill, named in the project's `.baton-epic-progress.json`) or a lifecycle session step (a task run, whose `taskRef` is
//! `<session>/step-<index>-<skill>`). The runs list groups runs by it and filters on it.

use baton_store::{Project, RunKind, RunMetadata};
use std::collections::HashMap;
use std::path::PathBuf;

/// The step a task run was made for: its `taskRef` is `<session>/step-<index>-<skill>`.
pub fn step_of(task_ref: &str) -> Option<(&str, u64, &str)> {
    let (session, step) = task_ref.split_once('/')?;
    let (index, skill) = step.strip_prefix("step-")?.split_once('-')?;
    Some((session, index.parse().ok()?, skill))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// A phase run of an epic story.
    Story {
        story: String,
        phase: String,
        n: u32,
    },
    /// A task run of a session step.
    Step {
        session: String,
        index: u64,
        skill: String,
    },
}

impl Part {
    /// The group's key on a page (runs of the same story or step of the same project).
    pub fn group_key(&self, root: &std::path::Path) -> String {
        match self {
            Part::Story { story, .. } => format!("story:{}:{story}", root.display()),
            Part::Step { session, index, .. } => {
                format!("step:{}:{session}:{index}", root.display())
            }
        }
    }

    /// What the runs list's `group` filter matches: the story key or the session id.
    pub fn name(&self) -> &str {
        match self {
            Part::Story { story, .. } => story,
            Part::Step { session, .. } => session,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Part::Story { .. } => "epic",
            Part::Step { .. } => "session",
        }
    }
}

/// The `part` filter's values: any, epic phase runs, session task runs, runs of neither.
pub const KINDS: [(&str, &str); 4] = [
    ("", "any"),
    ("epic", "epic stories"),
    ("session", "session steps"),
    ("single", "neither"),
];

/// Whether a run that is `part` passes the filters `kind` (one of [`KINDS`]) and `group` (a
/// story key or session id; empty = any).
pub fn keeps(kind: &str, group: &str, part: Option<&Part>) -> bool {
    let kind_ok = match kind {
        "" => true,
        "single" => part.is_none(),
        k => part.is_some_and(|p| p.kind() == k),
    };
    kind_ok && (group.is_empty() || part.is_some_and(|p| p.name() == group))
}

/// Looks runs up, reading each project's epic progress record once.
#[derive(Default)]
pub struct Parts {
    /// By the folder whose progress record was read: a project, or a worktree of one.
    phase_runs: HashMap<PathBuf, HashMap<String, Part>>,
}

impl Parts {
    pub fn of(&mut self, project: &Project, run: &RunMetadata) -> Option<Part> {
        if run.kind == RunKind::Task
            && let Some((session, index, skill)) = step_of(&run.workflow_ref)
        {
            return Some(Part::Step {
                session: session.to_string(),
                index,
                skill: skill.to_string(),
            });
        }
        // Any other run, a task run too: an epic phase run of the project's own BMAD skill is
        // a task run the progress record names like a package's phase run.
        let root = project.root().to_path_buf();
        let runs = self
            .phase_runs
            .entry(root.clone())
            .or_insert_with_key(|root| by_run(baton_epic::board::phase_runs(root)));
        if let Some(part) = runs.get(&run.run_id) {
            return Some(part.clone());
        }
        // A story of a parallel epic still in flight: its worktree's record names its runs.
        let tree = run.work_tree.as_ref()?;
        self.phase_runs
            .entry(tree.clone())
            .or_insert_with(|| by_run(baton_epic::board::phase_runs_in_work_tree(&root, tree)))
            .get(&run.run_id)
            .cloned()
    }
}

fn by_run(records: Vec<baton_epic::progress::RunRecord>) -> HashMap<String, Part> {
    records
        .into_iter()
        .map(|r| {
            let part = Part::Story {
                story: r.story_key,
                phase: r.phase.as_str().to_string(),
                n: r.n,
            };
            (r.run_id, part)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_keep_what_they_name() {
        let story = Part::Story {
            story: "1-2-x".into(),
            phase: "dev".into(),
            n: 1,
        };
        let step = Part::Step {
            session: "S-1".into(),
            index: 2,
            skill: "plan".into(),
        };
        assert!(keeps("", "", None));
        assert!(keeps("epic", "", Some(&story)));
        assert!(!keeps("epic", "", Some(&step)));
        assert!(!keeps("epic", "", None));
        assert!(keeps("session", "S-1", Some(&step)));
        assert!(!keeps("session", "S-2", Some(&step)));
        assert!(keeps("single", "", None));
        assert!(!keeps("single", "", Some(&story)));
        assert!(keeps("", "1-2-x", Some(&story)));
        assert!(!keeps("", "1-2-x", None));
        assert_eq!(step.group_key(std::path::Path::new("/p")), "step:/p:S-1:2");
    }
}
