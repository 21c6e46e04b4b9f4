//! What `baton runs list/show --json` and `baton serve` report about runs: the listing (with
//! paging and filters, read from the runs index only), and one run's metadata, state, progress
//! per node and completion.

use baton_package::graph::Graph;
use baton_store::driver_lock;
use baton_store::{
    Phase, Project, RunError, RunKind, RunMetadata, Store, StoreListing, StoreWarning,
};
use serde_json::{Value, json};

/// One run of `runs list --json`: its metadata, and `interrupted` when that is true.
#[derive(Debug, serde::Serialize)]
pub struct Listed<'a> {
    #[serde(flatten)]
    pub run: &'a RunMetadata,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// The phase as people should read it: a `running` run that no process drives was
/// interrupted; a failed run that never reached its model says so (`model-unreachable`).
pub fn phase_text(project: &Project, run: &RunMetadata) -> &'static str {
    if driver_lock::is_interrupted(project, run) {
        "interrupted"
    } else if run.phase == Phase::Failed
        && run.stop_reason.as_deref() == Some(baton_store::MODEL_UNREACHABLE)
    {
        baton_store::MODEL_UNREACHABLE
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
    /// The model calls of the run, summed from its audit log: usage, and how well its requests
    /// share prefixes.
    pub spending: crate::spend::Recorded,
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
            // What `answer`, `resume` and `chat` go on with unless told otherwise (a task run
            // has no nodes: none).
            "context": (self.run.kind != RunKind::Task).then(|| self.run.context.as_str()),
            "usage": self.spending.run_usage(),
            "cacheablePrefixShare": self.spending.cacheable_prefix_share(),
            "prefixExtensions": self.spending.prefix_extensions(),
            "runPrefixExtensions": self.spending.run_extensions(),
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
    let spending = crate::spend::recorded(&project.run_paths(&run.run_id).execution_log, None);
    let mut view = RunView {
        project,
        run,
        state: Value::Null,
        progress: Value::Null,
        complete: None,
        note: None,
        graph: None,
        spending,
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

/// A filtered or cursor page first reads this many pages' worth of the newest runs (at least
/// [`FIRST_WINDOW_MIN`]); when they do not fill it, the whole index is read. Not more steps in
/// between: reading many records from the index's end, one line at a time, costs about what
/// parsing the whole file does (measured at 10,000 runs), so each step would only add to the
/// worst case.
const FIRST_WINDOW_PAGES: usize = 8;
const FIRST_WINDOW_MIN: usize = 1024;

/// A page of runs, read from the runs index only (never every run directory), newest first:
/// the index's newest records are read and filtered, and the whole index only when they do not
/// fill the page, so a common filter or an early cursor never parses the whole index (at
/// 10,000 runs it is 4 MB). A rare filter or a deep cursor still reads it once.
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
    let filtered = query.phase.is_some() || query.workflow.is_some() || after.is_some();
    // The newest limit+1 say whether there is a next page; a filter will drop some.
    let mut window = Some(if filtered {
        (limit + 1)
            .saturating_mul(FIRST_WINDOW_PAGES)
            .max(FIRST_WINDOW_MIN)
    } else {
        limit + 1
    });
    let project = query.project.map(|root| store.project(root)).transpose()?;
    let mut warnings: Vec<StoreWarning> = Vec::new();
    loop {
        let StoreListing {
            rows,
            more,
            warnings: found,
        } = newest(store, project.as_ref(), window)?;
        // A repair made by one read is reported once, whatever the next reads say.
        for w in found {
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
        let mut kept = select(rows, query, after.as_ref(), limit);
        if kept.len() > limit || !more {
            let next_cursor = if kept.len() > limit {
                kept.truncate(limit);
                kept.last()
                    .map(|(_, r)| format!("{}~{}", r.created_at, r.run_id))
            } else {
                None
            };
            return Ok(Page {
                rows: kept,
                next_cursor,
                warnings,
            });
        }
        window = None;
    }
}

/// The newest `window` runs (all with `None`) of one project or of all, and whether older ones
/// were left out.
fn newest(
    store: &Store,
    project: Option<&Project>,
    window: Option<usize>,
) -> Result<StoreListing, RunError> {
    match project {
        Some(project) => {
            let found = project.runs(window)?;
            Ok(StoreListing {
                rows: found
                    .runs
                    .into_iter()
                    .map(|r| (project.clone(), r))
                    .collect(),
                more: found.more,
                warnings: found.warnings,
            })
        }
        None => store.runs(window),
    }
}

/// The runs of `rows` (newest first) the query keeps, up to `limit + 1` of them.
fn select(
    rows: Vec<(Project, RunMetadata)>,
    query: &ListQuery<'_>,
    after: Option<&(String, String)>,
    limit: usize,
) -> Vec<(Project, RunMetadata)> {
    let mut kept = Vec::with_capacity(limit + 1);
    for (project, run) in rows {
        if let Some((at, id)) = after
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
    kept
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

    /// A new run of the create-story-micro example in a project at `root`.
    fn micro_run(
        store: &Store,
        root: &std::path::Path,
    ) -> (Project, baton_package::Package, RunMetadata) {
        std::fs::create_dir_all(root).unwrap();
        let project = store.project(root).unwrap();
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
        (project, package, run)
    }

    /// The view carries the pinned workflow's graph, so a page drawing it loads the package
    /// once; the graph is there even when the state file cannot be read.
    #[test]
    fn a_workflow_run_view_carries_its_graph() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(tmp.path().join("home"));
        let (project, package, run) = micro_run(&store, &tmp.path().join("p"));
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

    /// `count` runs in one project, a second apart (oldest first), phase `phase(i)`, with the
    /// index written whole into `runsIndex.json` (one record per line, oldest first).
    fn project_with_runs(
        store: &Store,
        root: &std::path::Path,
        count: usize,
        start_ms: u64,
        phase: impl Fn(usize) -> Phase,
    ) -> Vec<RunMetadata> {
        let (project, _, template) = micro_run(store, root);
        std::fs::remove_dir_all(project.run_paths(&template.run_id).dir).unwrap();
        let runs: Vec<RunMetadata> = (0..count)
            .map(|i| {
                let ms = start_ms + i as u64 * 1000;
                let id = uuid::Builder::from_unix_timestamp_millis(ms, &[i as u8; 10])
                    .into_uuid()
                    .to_string();
                let created = baton_store::time::rfc3339(ms / 1000);
                RunMetadata {
                    run_id: id,
                    created_at: created.clone(),
                    last_updated_at: created,
                    phase: phase(i),
                    ..template.clone()
                }
            })
            .collect();
        for run in &runs {
            let paths = project.run_paths(&run.run_id);
            std::fs::create_dir_all(&paths.dir).unwrap();
            std::fs::write(paths.metadata_file(), serde_json::to_vec(run).unwrap()).unwrap();
        }
        project.reindex().unwrap();
        runs
    }

    fn ids(page: &Page) -> Vec<String> {
        page.rows.iter().map(|(_, r)| r.run_id.clone()).collect()
    }

    /// Every page of `query`, following `nextCursor`.
    fn all_pages(store: &Store, query: &ListQuery<'_>) -> Vec<String> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let q = ListQuery {
                cursor: cursor.as_deref(),
                ..query.clone()
            };
            let page = list(store, &q).unwrap();
            assert!(page.rows.len() <= query.limit);
            out.extend(ids(&page));
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return out,
            }
        }
    }

    /// A filtered page and a cursor page near the top are served from the index's newest
    /// records: a damaged old record (which a whole read would find, and repair with a
    /// warning) is not even parsed.
    #[test]
    fn filtered_and_cursor_pages_read_only_the_newest_records_they_need() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path());
        let root = tempfile::tempdir().unwrap();
        let waiting = |i: usize| {
            if i.is_multiple_of(3) {
                Phase::WaitingUser
            } else {
                Phase::Completed
            }
        };
        let runs = project_with_runs(&store, root.path(), 1100, 1_700_000_000_000, waiting);
        let project = store.project(root.path()).unwrap();
        let index = project.dir.join("runsIndex.json");
        let text = std::fs::read_to_string(&index).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1102, "[, 1,100 records, ]");
        lines[1] = "{\"runId\": 1},";
        std::fs::write(&index, lines.join("\n") + "\n").unwrap();

        let newest_waiting: Vec<String> = runs
            .iter()
            .rev()
            .filter(|r| r.phase == Phase::WaitingUser)
            .map(|r| r.run_id.clone())
            .collect();
        let first = list(
            &store,
            &ListQuery {
                project: Some(root.path()),
                phase: Some("waiting-user"),
                limit: 10,
                ..ListQuery::default()
            },
        )
        .unwrap();
        assert_eq!(ids(&first), newest_waiting[..10]);
        assert!(first.warnings.is_empty(), "{:?}", first.warnings);
        let second = list(
            &store,
            &ListQuery {
                phase: Some("waiting-user"),
                cursor: first.next_cursor.as_deref(),
                limit: 10,
                ..ListQuery::default()
            },
        )
        .unwrap();
        assert_eq!(ids(&second), newest_waiting[10..20]);
        assert!(second.warnings.is_empty(), "{:?}", second.warnings);
        let unfiltered_second = list(
            &store,
            &ListQuery {
                project: Some(root.path()),
                cursor: first.next_cursor.as_deref(),
                limit: 10,
                ..ListQuery::default()
            },
        )
        .unwrap();
        assert_eq!(unfiltered_second.rows.len(), 10);
        assert!(unfiltered_second.warnings.is_empty());
        assert_eq!(
            std::fs::read_to_string(&index).unwrap(),
            lines.join("\n") + "\n",
            "the index was left as it was"
        );
        // A filter nothing matches reads back to the oldest record: the damage is found,
        // repaired and reported, and nothing is lost.
        let none = list(
            &store,
            &ListQuery {
                workflow: Some("nothing"),
                limit: 10,
                ..ListQuery::default()
            },
        )
        .unwrap();
        assert!(none.rows.is_empty() && none.next_cursor.is_none());
        assert_eq!(none.warnings.len(), 1, "{:?}", none.warnings);
        let all = list(
            &store,
            &ListQuery {
                project: Some(root.path()),
                limit: 500,
                ..ListQuery::default()
            },
        )
        .unwrap();
        assert_eq!(all.rows.len(), 500);
        assert_eq!(
            all_pages(
                &store,
                &ListQuery {
                    limit: 500,
                    ..ListQuery::default()
                }
            )
            .len(),
            1100
        );
    }

    /// Pages together are exactly what a whole read filters, whether the newest records fill
    /// them or the whole index has to be read (a phase only the oldest of 1,100 runs have),
    /// every run page by page, and the same across all projects.
    #[test]
    fn filtered_pages_miss_nothing_whether_the_newest_records_fill_them_or_not() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path());
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let failed_oldest = |i: usize| {
            if i < 3 {
                Phase::Failed
            } else {
                Phase::Completed
            }
        };
        let mut runs = project_with_runs(&store, a.path(), 1100, 1_700_000_000_000, failed_oldest);
        runs.extend(project_with_runs(
            &store,
            b.path(),
            40,
            1_700_000_000_500,
            |i| {
                if i % 10 == 0 {
                    Phase::Failed
                } else {
                    Phase::Idle
                }
            },
        ));
        // Newest first, as listed (both projects' runs share one clock).
        runs.sort_by(|x, y| (&y.created_at, &y.run_id).cmp(&(&x.created_at, &x.run_id)));
        let expect = |root: Option<&std::path::Path>, phase: Option<Phase>| -> Vec<String> {
            runs.iter()
                .filter(|r| phase.is_none_or(|p| r.phase == p))
                .filter(|r| {
                    root.is_none_or(|root| r.project_id == store.project(root).unwrap().id())
                })
                .map(|r| r.run_id.clone())
                .collect()
        };
        for (root, phase, limit) in [
            (Some(a.path()), Some(Phase::Failed), 1),
            (Some(a.path()), Some(Phase::Failed), 2),
            (Some(a.path()), None, 100),
            (Some(a.path()), Some(Phase::Completed), 400),
            (Some(b.path()), Some(Phase::Failed), 1),
            (None, Some(Phase::Failed), 2),
            (None, Some(Phase::Idle), 3),
            (None, None, 500),
            (None, None, 90),
        ] {
            let query = ListQuery {
                project: root,
                phase: phase.map(|p| p.as_str()),
                limit,
                ..ListQuery::default()
            };
            let got = all_pages(&store, &query);
            assert_eq!(got, expect(root, phase), "{root:?} {phase:?} {limit}");
        }
        let none = ListQuery {
            workflow: Some("nothing"),
            limit: 5,
            ..ListQuery::default()
        };
        assert!(all_pages(&store, &none).is_empty());
    }
}
