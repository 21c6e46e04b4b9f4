//! What `baton runs list/show --json` and `baton serve` report about runs: the listing (with
//! paging and filters, read from the runs index only), and one run's metadata, state, progress
//! per node and completion.

use baton_package::graph::Graph;
use baton_store::driver_lock;
use baton_store::{Phase, Project, RunError, RunKind, RunMetadata, Store, StoreWarning};
use serde_json::{Value, json};

/// One run of `runs list --json`: its metadata, and `interrupted` when that is true.
#[derive(Debug, serde::Serialize)]
pub struct Listed<'a> {
    #[serde(flatten)]
    pub run: &'a RunMetadata,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// The phase as people should read it: a `running` run that no process drives was interrupted.
pub fn phase_text(project: &Project, run: &RunMetadata) -> &'static str {
    if driver_lock::is_interrupted(project, run) {
        "interrupted"
    } else {
        run.phase.as_str()
    }
}

/// The run's metadata, plus `"interrupted": true` for an interrupted run.
pub fn run_json(project: &Project, run: &RunMetadata) -> Value {
    let mut v = json!(run);
    if driver_lock::is_interrupted(project, run) {
        v["interrupted"] = json!(true);
    }
    v
}

/// One run as `runs show` reports it.
#[derive(Debug, Clone)]
pub struct RunView {
    pub project: Project,
    pub run: RunMetadata,
    /// The state file's frontmatter (`Null` for a task run or an unreadable state).
    pub state: Value,
    /// `[{nodeId, type, title, status}]` per node of the workflow (`Null` when unknown).
    pub progress: Value,
    pub complete: Option<bool>,
    /// Why the state or progress is missing.
    pub note: Option<String>,
    /// The workflow graph of the pinned package (`None` for a task run, or when the package or
    /// the workflow cannot be read): a caller drawing it need not load the package again.
    pub graph: Option<Graph>,
}

impl RunView {
    /// The JSON of `baton runs show --json`.
    pub fn to_json(&self) -> Value {
        json!({
            "run": run_json(&self.project, &self.run),
            "projectRoot": self.project.root(),
            "state": self.state,
            "progress": self.progress,
            "complete": self.complete,
            "note": self.note,
        })
    }
}

/// Finds a run by id or unique prefix and reads what `runs show` reports of it.
pub fn show(store: &Store, query: &str) -> Result<RunView, RunError> {
    let (project, run) = store.find_run(query)?;
    Ok(view(store, project, run))
}

/// What `runs show` reports of a run already found.
pub fn view(store: &Store, project: Project, run: RunMetadata) -> RunView {
    let mut view = RunView {
        project,
        run,
        state: Value::Null,
        progress: Value::Null,
        complete: None,
        note: None,
        graph: None,
    };
    // A task run has no package, graph or state file: nothing to report beyond run.json.
    if view.run.kind != RunKind::Task {
        read_workflow(store, &mut view);
    }
    view
}

/// A workflow run's graph (even when its state cannot be read), state frontmatter, progress
/// per node, completion, and a note when one of them could not be read.
fn read_workflow(store: &Store, view: &mut RunView) {
    let (project, run) = (&view.project, &view.run);
    let state = project.state_file(&run.run_id).read();
    let pinned = project.pinned_package(store, run);
    view.graph = pinned
        .as_ref()
        .ok()
        .and_then(|(package, _)| package.workflow(&run.workflow_ref))
        .map(|w| w.graph.clone());
    let s = match (state, pinned) {
        (Err(e), _) => {
            view.note = Some(format!("state unreadable: {e}"));
            return;
        }
        (Ok(s), Err(e)) => {
            view.note = Some(format!("progress unavailable: {e}"));
            s
        }
        (Ok(s), Ok(_)) => {
            match &view.graph {
                Some(g) => {
                    view.progress = serde_json::to_value(s.doc.progress(g)).unwrap_or(Value::Null);
                    view.complete = Some(s.doc.is_complete(g));
                }
                None => {
                    view.note = Some(format!(
                        "workflow {} is not in the package",
                        view.run.workflow_ref
                    ));
                }
            }
            s
        }
    };
    view.state = s.doc.to_value();
}

/// Most runs one page holds.
pub const MAX_PAGE: usize = 500;

/// What to list.
#[derive(Debug, Clone, Default)]
pub struct ListQuery<'a> {
    /// Only this project (its root directory).
    pub project: Option<&'a std::path::Path>,
    /// Only runs in this phase (`running`, `waiting-user`, `completed`, `failed`, `idle`, or
    /// `interrupted`).
    pub phase: Option<&'a str>,
    /// Only runs of this workflow.
    pub workflow: Option<&'a str>,
    /// Runs per page (at most [`MAX_PAGE`]).
    pub limit: usize,
    /// The `nextCursor` of the previous page: only runs older than it.
    pub cursor: Option<&'a str>,
}

/// One page of runs, newest first.
#[derive(Debug, Default)]
pub struct Page {
    pub rows: Vec<(Project, RunMetadata)>,
    /// Where the next page starts (`None`: this is the last page).
    pub next_cursor: Option<String>,
    pub warnings: Vec<StoreWarning>,
}

impl Page {
    /// `{runs: [<as runs list --json>], nextCursor, warnings: [{code, message}]}`
    pub fn to_json(&self) -> Value {
        let runs: Vec<Listed> = self
            .rows
            .iter()
            .map(|(p, r)| Listed {
                run: r,
                interrupted: driver_lock::is_interrupted(p, r),
            })
            .collect();
        let warnings: Vec<Value> = self
            .warnings
            .iter()
            .map(|w| json!({"code": w.code, "message": w.message}))
            .collect();
        json!({"runs": runs, "nextCursor": self.next_cursor, "warnings": warnings})
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("{0}")]
    BadQuery(String),
}

impl ListError {
    pub fn code(&self) -> &'static str {
        match self {
            ListError::Run(e) => e.code(),
            ListError::BadQuery(_) => "QUERY_INVALID",
        }
    }
}

const PHASES: [&str; 6] = [
    "running",
    "waiting-user",
    "completed",
    "failed",
    "idle",
    "interrupted",
];

/// A page of runs, read from the runs index only (never every run directory). The first
/// unfiltered page reads the index's newest records alone; a filter or a cursor reads the
/// whole index once.
pub fn list(store: &Store, query: &ListQuery<'_>) -> Result<Page, ListError> {
    if let Some(phase) = query.phase
        && !PHASES.contains(&phase)
    {
        return Err(ListError::BadQuery(format!(
            "unknown phase {phase:?}; one of {}",
            PHASES.join(", ")
        )));
    }
    let after = query.cursor.map(parse_cursor).transpose()?;
    let limit = query.limit.clamp(1, MAX_PAGE);
    // Without a filter or a cursor, the newest limit+1 say whether there is a next page.
    let read_limit =
        (query.phase.is_none() && query.workflow.is_none() && after.is_none()).then_some(limit + 1);
    let (rows, warnings): (Vec<(Project, RunMetadata)>, Vec<StoreWarning>) = match query.project {
        Some(root) => {
            let project = store.project(root)?;
            let found = project.runs(read_limit)?;
            let rows = found
                .runs
                .into_iter()
                .map(|r| (project.clone(), r))
                .collect();
            (rows, found.warnings)
        }
        None => {
            let all = store.runs(read_limit)?;
            (all.rows, all.warnings)
        }
    };
    let mut kept = Vec::with_capacity(limit + 1);
    for (project, run) in rows {
        if let Some((at, id)) = &after
            && (run.created_at.as_str(), run.run_id.as_str()) >= (at.as_str(), id.as_str())
        {
            continue;
        }
        if query.workflow.is_some_and(|w| w != run.workflow_ref) {
            continue;
        }
        if let Some(phase) = query.phase
            && phase_of(&project, &run) != phase
        {
            continue;
        }
        kept.push((project, run));
        if kept.len() > limit {
            break;
        }
    }
    let next_cursor = if kept.len() > limit {
        kept.truncate(limit);
        kept.last()
            .map(|(_, r)| format!("{}~{}", r.created_at, r.run_id))
    } else {
        None
    };
    Ok(Page {
        rows: kept,
        next_cursor,
        warnings,
    })
}

fn phase_of(project: &Project, run: &RunMetadata) -> &'static str {
    if run.phase == Phase::Running {
        phase_text(project, run)
    } else {
        run.phase.as_str()
    }
}

fn parse_cursor(text: &str) -> Result<(String, String), ListError> {
    match text.split_once('~') {
        Some((at, id)) if !at.is_empty() && !id.is_empty() => Ok((at.to_string(), id.to_string())),
        _ => Err(ListError::BadQuery(format!(
            "cursor {text:?} is not a nextCursor this server gave"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(phase: Option<&'static str>, cursor: Option<&'static str>) -> ListQuery<'static> {
        ListQuery {
            phase,
            cursor,
            limit: 10,
            ..ListQuery::default()
        }
    }

    /// The view carries the pinned workflow's graph, so a page drawing it loads the package
    /// once; the graph is there even when the state file cannot be read.
    #[test]
    fn a_workflow_run_view_carries_its_graph() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(tmp.path().join("home"));
        let root = tmp.path().join("p");
        std::fs::create_dir_all(&root).unwrap();
        let project = store.project(&root).unwrap();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/packages/create-story-micro");
        let package = baton_package::Package::load(&dir).unwrap();
        let installed = store.packages().install(&package, "test").unwrap().package;
        let run = project
            .create_run(baton_store::NewRun {
                package: &package,
                installed: &installed,
                workflow_ref: None,
                agent_id: "sm",
            })
            .unwrap();
        let expected = &package.workflow(&run.workflow_ref).unwrap().graph;

        let view = show(&store, &run.run_id).unwrap();
        assert_eq!(view.graph.as_ref(), Some(expected));
        assert!(view.note.is_none(), "{:?}", view.note);

        std::fs::remove_file(project.state_file(&run.run_id).path()).unwrap();
        let view = show(&store, &run.run_id).unwrap();
        assert!(view.note.unwrap().starts_with("state unreadable"));
        assert_eq!(view.graph.as_ref(), Some(expected));
    }

    #[test]
    fn an_empty_store_lists_nothing_and_bad_queries_are_refused_before_reading() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path());
        let page = list(&store, &query(None, None)).unwrap();
        assert!(page.rows.is_empty());
        assert_eq!(
            page.to_json(),
            json!({"runs": [], "nextCursor": null, "warnings": []})
        );
        for phase in ["waiting-user", "interrupted", "idle"] {
            assert!(list(&store, &query(Some(phase), None)).is_ok(), "{phase}");
        }
        for (phase, cursor) in [
            (Some("waiting_user"), None),
            (Some("done"), None),
            (None, Some("no-tilde")),
            (None, Some("~id")),
            (None, Some("2026-01-01T00:00:00Z~")),
        ] {
            let e = list(&store, &query(phase, cursor)).unwrap_err();
            assert_eq!(e.code(), "QUERY_INVALID", "{phase:?} {cursor:?}");
        }
    }
}
