//! The page handlers: read through the library calls the CLI and the API use (on a blocking
//! thread: they touch files), hand plain data to a render function, wrap it in the shell.

use super::layout::{Nav, page};
use super::shown_path::Roots;
use super::{epic, projects, run_page, run_parts, runs_list, session, start};
use crate::state::AppState;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use baton_engine::inspect::{self, ListQuery};
use baton_lifecycle::ralph::verbs::session::{self as ralph_session, summary_json};
use baton_lifecycle::ralph::{Context, decisions, discovery};
use baton_store::{Store, driver_lock, jsonl};
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Runs per page of the runs list.
const PAGE_SIZE: usize = 50;
/// The newest bytes of a conversation log a run page reads (the page shows the newest
/// messages only; a long run's log can be large).
const CONVERSATION_TAIL: u64 = 4 * 1024 * 1024;
/// Decisions shown on a session page.
const DECISIONS: usize = 50;
/// Sessions listed for a project.
const SESSIONS: usize = 100;

/// A page answer: HTML with a status.
struct PageOut {
    status: StatusCode,
    title: String,
    nav: Nav,
    body: String,
}

impl PageOut {
    fn ok(title: impl Into<String>, nav: Nav, body: String) -> PageOut {
        PageOut {
            status: StatusCode::OK,
            title: title.into(),
            nav,
            body,
        }
    }

    fn error(
        status: StatusCode,
        nav: Nav,
        code: &str,
        message: &str,
        hint: Option<&str>,
    ) -> PageOut {
        let mut body = String::from(
            "<h1>Something is wrong</h1><div class=\"card\" id=\"page-error\" role=\"alert\"><p><code>",
        );
        super::html::push_esc(&mut body, code);
        body.push_str("</code> ");
        super::html::push_esc(&mut body, message);
        body.push_str("</p>");
        if let Some(h) = hint {
            body.push_str("<p class=\"muted\">");
            super::html::push_esc(&mut body, h);
            body.push_str("</p>");
        }
        body.push_str("</div>");
        PageOut {
            status,
            title: "Error".into(),
            nav,
            body,
        }
    }

    fn into_response(self, state: &AppState) -> Response {
        let html = page(&self.title, self.nav, state.token.as_str(), &self.body);
        (self.status, Html(html)).into_response()
    }
}

/// Runs `work` on a blocking thread under the server's permit and deadline; a panic or a
/// read that never returns becomes an error page, not a dead server.
async fn blocking(
    state: &AppState,
    nav: Nav,
    work: impl FnOnce(&Store) -> PageOut + Send + 'static,
) -> Response {
    let store = state.store.clone();
    match state.blocking.run(move || work(&store)).await {
        Ok(out) => out.into_response(state),
        Err(e) => {
            PageOut::error(e.status(), nav, e.code(), &e.to_string(), e.hint()).into_response(state)
        }
    }
}

fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// The roots of the projects the store knows, newest first.
fn known_projects(store: &Store) -> Vec<String> {
    projects::roots(&projects::newest_first(store))
}

#[derive(Debug, Default, serde::Deserialize)]
pub struct RunsQuery {
    project: Option<String>,
    phase: Option<String>,
    workflow: Option<String>,
    /// `epic`, `session` or `single`: runs of epic stories, of session steps, of neither.
    part: Option<String>,
    /// A story key or a session id.
    group: Option<String>,
    cursor: Option<String>,
}

/// Pages of the index read, at most, to fill one page filtered on what runs are part of.
const PART_PAGES: usize = 20;

/// One page of runs with what each is part of, filtered on it: the listing's pages are read
/// until a page is filled (at most [`PART_PAGES`] of [`inspect::MAX_PAGE`] runs).
fn list_parts(
    store: &Store,
    query: &ListQuery<'_>,
    filters: &runs_list::Filters,
    parts: &mut run_parts::Parts,
) -> Result<(inspect::Page, Vec<Option<run_parts::Part>>), inspect::ListError> {
    if filters.part.is_empty() && filters.group.is_empty() {
        let page = inspect::list(store, query)?;
        let found = page.rows.iter().map(|(p, r)| parts.of(p, r)).collect();
        return Ok((page, found));
    }
    let mut out = inspect::Page::default();
    let mut found = Vec::new();
    let mut cursor = query.cursor.map(str::to_string);
    for _ in 0..PART_PAGES {
        let wide = ListQuery {
            limit: inspect::MAX_PAGE,
            cursor: cursor.as_deref(),
            ..query.clone()
        };
        let page = inspect::list(store, &wide)?;
        for w in page.warnings {
            if !out.warnings.contains(&w) {
                out.warnings.push(w);
            }
        }
        for (p, r) in page.rows {
            let part = parts.of(&p, &r);
            if !run_parts::keeps(&filters.part, &filters.group, part.as_ref()) {
                continue;
            }
            if out.rows.len() == query.limit {
                // One more than a page: the page ends at the last one kept.
                out.next_cursor = out
                    .rows
                    .last()
                    .map(|(_, r)| format!("{}~{}", r.created_at, r.run_id));
                return Ok((out, found));
            }
            out.rows.push((p, r));
            found.push(part);
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok((out, found)),
        }
    }
    // Not filled within the pages read: the next page goes on from there.
    out.next_cursor = cursor;
    Ok((out, found))
}

pub async fn runs(State(state): State<AppState>, Query(q): Query<RunsQuery>) -> Response {
    blocking(&state, Nav::Runs, move |store| {
        let text = |v: &Option<String>| non_empty(v).unwrap_or("").to_string();
        let filters = runs_list::Filters {
            project: text(&q.project),
            phase: text(&q.phase),
            workflow: text(&q.workflow),
            part: text(&q.part),
            group: text(&q.group),
        };
        let project = non_empty(&q.project).map(PathBuf::from);
        let query = ListQuery {
            project: project.as_deref(),
            phase: non_empty(&q.phase),
            workflow: non_empty(&q.workflow),
            limit: PAGE_SIZE,
            cursor: non_empty(&q.cursor),
        };
        let projects = known_projects(store);
        let mut parts = run_parts::Parts::default();
        let (listed, found, problem) = match list_parts(store, &query, &filters, &mut parts) {
            Ok((p, f)) => (p, f, None),
            Err(e) => (
                inspect::Page::default(),
                Vec::new(),
                Some(format!("{}: {e}", e.code())),
            ),
        };
        let mut warnings: Vec<String> = listed
            .warnings
            .iter()
            .map(|w| format!("{}: {}", w.code, w.message))
            .collect();
        warnings.extend(problem);
        let rows = listed
            .rows
            .iter()
            .zip(found)
            .map(|((p, r), part)| runs_list::Row {
                run: r,
                project_root: p.root(),
                interrupted: driver_lock::is_interrupted(p, r),
                part,
            })
            .collect();
        let body = runs_list::render(&runs_list::View {
            rows,
            filters: &filters,
            next_cursor: listed.next_cursor.as_deref(),
            paged: non_empty(&q.cursor).is_some(),
            projects: &projects,
            warnings: &warnings,
            now_secs: baton_store::time::now_secs(),
        });
        PageOut::ok("Runs", Nav::Runs, body)
    })
    .await
}

/// The newest [`CONVERSATION_TAIL`] bytes of a JSONL file, parsed; a window that starts
/// mid-file loses its first (partial) line, never parses it.
fn read_tail(path: &Path) -> Vec<Value> {
    let Ok(mut file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(CONVERSATION_TAIL);
    if file.seek(SeekFrom::Start(start)).is_err() {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    if file
        .take(CONVERSATION_TAIL)
        .read_to_end(&mut bytes)
        .is_err()
    {
        return Vec::new();
    }
    let from = if start > 0 {
        bytes
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |i| i + 1)
    } else {
        0
    };
    jsonl::parse(&bytes[from..]).records
}

pub async fn run(State(state): State<AppState>, UrlPath(id): UrlPath<String>) -> Response {
    blocking(&state, Nav::Runs, move |store| {
        let view = match inspect::show(store, &id) {
            Ok(v) => v,
            Err(e) => {
                let status = match e.code() {
                    "RUN_NOT_FOUND" => StatusCode::NOT_FOUND,
                    "RUN_ID_AMBIGUOUS" => StatusCode::BAD_REQUEST,
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                };
                return PageOut::error(
                    status,
                    Nav::Runs,
                    e.code(),
                    &e.to_string(),
                    e.hint().as_deref(),
                );
            }
        };
        let (project, run) = (&view.project, &view.run);
        let conversation = read_tail(&project.run_paths(&run.run_id).conversation_log);
        let artifacts: Vec<&str> = view
            .state
            .get("artifacts")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let progress = view.progress.as_array().map(Vec::as_slice).unwrap_or(&[]);
        let body = run_page::render(&run_page::View {
            run,
            project_root: project.root(),
            interrupted: driver_lock::is_interrupted(project, run),
            driven: driver_lock::is_driven(project, &run.run_id),
            graph: view.graph.as_ref(),
            progress,
            artifacts: &artifacts,
            conversation: &conversation,
            note: view.note.as_deref(),
        });
        let title = format!("Run {}", run.run_id.get(..13).unwrap_or(&run.run_id));
        PageOut::ok(title, Nav::Runs, body)
    })
    .await
}

#[derive(Debug, Default, serde::Deserialize)]
pub struct StartQuery {
    package: Option<String>,
    workflow: Option<String>,
    agent: Option<String>,
    project: Option<String>,
    model: Option<String>,
    replay: Option<String>,
}

pub async fn start_page(State(state): State<AppState>, Query(q): Query<StartQuery>) -> Response {
    blocking(&state, Nav::Start, move |store| {
        let packages: Vec<start::Suggestion> = store
            .packages()
            .list()
            .unwrap_or_default()
            .into_iter()
            // The API takes a package directory: an installed package's is suggested.
            .map(|p| start::Suggestion {
                label: format!("{} {}", p.name, p.version),
                value: p.path.display().to_string(),
            })
            .collect();
        let projects = known_projects(store);
        let text = |v: &Option<String>| non_empty(v).unwrap_or("").to_string();
        let defaults = start::Defaults {
            package: text(&q.package),
            workflow: text(&q.workflow),
            agent: text(&q.agent),
            project: text(&q.project),
            model: text(&q.model),
            replay: text(&q.replay),
        };
        let body = start::render(&start::View {
            packages: &packages,
            projects: &projects,
            defaults: &defaults,
            demo: true,
        });
        PageOut::ok("Start a run", Nav::Start, body)
    })
    .await
}

#[derive(Debug, Default, serde::Deserialize)]
pub struct ProjectQuery {
    project: Option<String>,
}

pub async fn epic_board(State(state): State<AppState>, Query(q): Query<ProjectQuery>) -> Response {
    let start_dir = state.start_dir.clone();
    blocking(&state, Nav::Epic, move |store| {
        // Only projects with a sprint status: the others would open to an error.
        let projects = projects::with_sprint(store, start_dir.as_deref());
        let chosen = non_empty(&q.project).map(str::to_string);
        // None chosen: the project `baton serve` was started in, else the newest with a sprint.
        let project = chosen.or_else(|| projects.first().cloned());
        let mut body = String::from("<h1>Epic board</h1>");
        let shown = project.clone().unwrap_or_default();
        epic::project_form(&mut body, "/epic", &shown, &projects);
        projects::chooser(&mut body, "/epic", &shown, &projects);
        let Some(project) = project else {
            body.push_str(
                "<p class=\"empty\" id=\"epic-none\">No project with a sprint status yet. \
                 <code>baton demo epic</code> makes one; in a BMAD project, BMAD's sprint-planning \
                 workflow writes its <code>sprint-status.yaml</code>.</p>",
            );
            return PageOut::ok("Epic board", Nav::Epic, body);
        };
        match baton_epic::status_board(store, Path::new(&project), None) {
            Ok(mut board) => {
                // The worktrees' folder as a page shows a host path.
                if let Some(p) = board.parallel.as_mut() {
                    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
                    let roots = Roots::new(
                        Some(Path::new(&project)),
                        Some(store.home()),
                        home.as_deref(),
                    );
                    p.worktrees = roots.shown(&p.worktrees);
                }
                body.push_str(&epic::render(&board, &project));
            }
            Err(e) => body.push_str(&epic::no_board(&e)),
        }
        PageOut::ok("Epic board", Nav::Epic, body)
    })
    .await
}

/// The sessions of `project`, newest first: their summaries, and the ones that cannot be read.
fn session_summaries(project: &Path) -> (Vec<Value>, Vec<String>) {
    let ctx = Context::from_env(project, "baton ralph");
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for (id, summary) in ralph_session::list(&ctx, SESSIONS).sessions {
        match summary {
            Ok(summary) => found.push(summary),
            Err(e) => problems.push(format!("{id}: {e}")),
        }
    }
    (found, problems)
}

pub async fn sessions(State(state): State<AppState>, Query(q): Query<ProjectQuery>) -> Response {
    blocking(&state, Nav::Sessions, move |store| {
        let projects = known_projects(store);
        let chosen = non_empty(&q.project).map(str::to_string);
        // None chosen: the newest known project that has sessions.
        let (project, listed) = match chosen {
            Some(p) => {
                let listed = session_summaries(Path::new(&p));
                (p, Some(listed))
            }
            None => projects
                .iter()
                .take(projects::LOOKED_AT)
                .find_map(|p| {
                    let (found, problems) = session_summaries(Path::new(p));
                    (!found.is_empty() || !problems.is_empty())
                        .then(|| (p.clone(), Some((found, problems))))
                })
                .unwrap_or_default(),
        };
        let mut body = String::from("<h1>Lifecycle sessions</h1>");
        epic::project_form(&mut body, "/sessions", &project, &projects);
        projects::chooser(&mut body, "/sessions", &project, &projects);
        match listed {
            Some((found, problems)) => {
                body.push_str(&session::render_list(&project, &found, &problems));
            }
            None if projects.is_empty() => body.push_str(
                "<p class=\"empty\" id=\"sessions-none\">No project yet. <code>baton demo session</code> makes one.</p>",
            ),
            None => body.push_str(
                "<p class=\"empty\" id=\"sessions-none\">None of the known projects has a lifecycle session; choose another directory.</p>",
            ),
        }
        PageOut::ok("Sessions", Nav::Sessions, body)
    })
    .await
}

/// The task runs of session `id`'s steps (oldest first per step), from the project's runs
/// index: a step run's `taskRef` names its session and step.
fn step_runs_of(store: &Store, project: &Path, id: &str) -> session::StepRuns {
    let mut found = session::StepRuns::new();
    let Some(project) = projects::registered(store, project) else {
        return found;
    };
    let Ok(listing) = project.runs(None) else {
        return found;
    };
    // The index is newest first.
    for run in listing.runs.iter().rev() {
        if run.kind != baton_store::RunKind::Task {
            continue;
        }
        if let Some((session_id, index, _)) = run_parts::step_of(&run.workflow_ref)
            && session_id == id
        {
            found.entry(index).or_default().push(session::StepRun {
                run_id: run.run_id.clone(),
                phase: inspect::phase_text(&project, run).to_string(),
            });
        }
    }
    found
}

pub async fn session_page(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<ProjectQuery>,
) -> Response {
    blocking(&state, Nav::Sessions, move |store| {
        let Some(project) = non_empty(&q.project) else {
            return PageOut::error(
                StatusCode::BAD_REQUEST,
                Nav::Sessions,
                "PROJECT_REQUIRED",
                "a session page needs ?project=<directory>",
                Some("open it from the sessions list"),
            );
        };
        let ctx = Context::from_env(Path::new(project), "baton ralph");
        let loaded = discovery::find(&ctx, Some(&id), discovery::Pick::Any)
            .and_then(discovery::Loaded::into_session);
        let s = match loaded {
            Ok(s) => s,
            Err(e) => {
                let status = if e.code() == "SESSION_NOT_FOUND" {
                    StatusCode::NOT_FOUND
                } else {
                    StatusCode::BAD_REQUEST
                };
                return PageOut::error(status, Nav::Sessions, e.code(), &e.to_string(), None);
            }
        };
        let recent = decisions::read_last(&s.dir, DECISIONS).unwrap_or_default();
        let roots = Roots::new(Some(&ctx.project), Some(store.home()), ctx.home.as_deref());
        let step_runs = step_runs_of(store, &ctx.project, &s.id);
        let mut summary = summary_json(&s);
        summary["position"] = baton_lifecycle::session::position::now(&s).into();
        if let Ok(p) = store.project(&ctx.project) {
            let u = baton_lifecycle::session::budget::usage(&s, &p);
            if !u.total.is_zero() {
                summary["usage"] = serde_json::json!({"total": u.total, "gates": u.gates});
            }
        }
        let body = session::render(
            &summary,
            &recent.records,
            recent.truncated,
            &roots,
            &step_runs,
        );
        PageOut::ok(format!("Session {}", s.id), Nav::Sessions, body)
    })
    .await
}
