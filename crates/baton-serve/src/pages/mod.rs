//! The embedded HTML pages: server-rendered, escaped with [`html::esc`], one stylesheet and one
//! small script from `/assets/` (the CSP allows nothing inline), works offline.
//!
//! Handlers hold no business logic: they read through the same library calls as the API and
//! hand plain data to the render functions of the submodules (pure, unit-tested).
//!
//! Stable element ids for tests and the browser test (`id` and, where noted, `data-testid`):
//! - every page: `nav-runs`, `nav-start`, `nav-epic`, `nav-sessions`, `nav-queue`, `main`;
//!   `<meta name="baton-token">` holds the token app.js sends as `Authorization: Bearer`.
//! - runs (`/`): form `runs-filter` with `filter-project`, `filter-phase`, `filter-workflow`,
//!   `filter-apply`; table `runs-table` (testid), rows `tr[data-run-id]`, `runs-empty`,
//!   `page-older` (testid), `page-newest`, `start-link`.
//! - a run (`/runs/{id}`): `run` (`data-run-id`, `data-events`), `run-phase` (testid,
//!   `data-phase`), `question-slot`, `graph-card`, `graph-svg` (testid `graph`; nodes are
//!   `g.node[data-node-id][data-status=completed|current|pending]`), `progress-list`,
//!   `progress-count`, `conversation-card`, `conversation` (testid), `run-facts`, `usage`
//!   (testid) with `usage-turns`, `usage-tools`, `usage-prompt`, `usage-completion`,
//!   `usage-total`, `usage-cached`, `usage-written` (in `usage-written-row`, hidden without cache
//!   writes), `usage-cost`, `artifacts-card`, `artifact-N` (testid), `artifact-preview` (testid),
//!   `timeline` (testid), `timeline-status`, `run-error` (with `run-hint` and `run-next`).
//! - the question (`question`, `data-key`): form `answer-form` (testid, `data-widget-type`
//!   = text|confirmation|selection|form|feedback|action_selection|plan_review), `question-text`
//!   (testid), `answer-status`; free text: `answer-text`, `answer-submit`; confirmation:
//!   `answer-confirm`, `answer-deny`; selection: `choice-N`, `answer-submit`; form:
//!   `field-N`, `answer-submit`; feedback: `item-N`, `answer-submit`; actions: `action-N`;
//!   plan review: `plan-feedback`, `plan-approve`, `plan-changes` (all testids too).
//! - start (`/start`): `demo-form` / `demo-submit` / `demo-status` (the bundled demo,
//!   `replay: "demo"`); `start-form` with `start-package`, `start-workflow`, `start-agent`,
//!   `start-project`, `start-model`, `start-replay`, `start-submit`, `start-status`.
//! - epic (`/epic?project=`) and sessions (`/sessions?project=`): `project-form`,
//!   `project-input`, `project-open`; `epic-summary`, `epic-failure`, `epic-error`,
//!   `board-N` (testid), columns `.column[data-status]`, cards `.story[data-story]`, answer
//!   forms `answer-<story>-<question>` (testid); `sessions-table` (testid), `sessions-empty`.
//! - a session (`/sessions/{id}?project=`): `session-status` (testid), `steps` (testid, items
//!   `li[data-index][data-status]`, the active one `aria-current="step"`), `goals`,
//!   `decisions` (testid).
//! - the queue (`/queue`, with `baton serve --db`): see [`queue`]; without `--db`, how to
//!   connect one: see [`queue_setup`].
//! - assets: `/assets/app.css`, `/assets/app.js`; the icon `/favicon.svg` (also as
//!   `/favicon.ico`).

mod epic;
mod graph_svg;
mod handlers;
mod html;
mod layout;
mod projects;
mod queue;
mod queue_setup;
mod run_page;
mod run_parts;
mod runs_list;
mod session;
mod shown_path;
mod start;
mod widget;

use crate::state::AppState;
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const APP_CSS: &str = include_str!("../../assets/app.css");
const APP_JS: &str = include_str!("../../assets/app.js");
const FAVICON: &str = include_str!("../../assets/favicon.svg");

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/assets/app.css", get(css))
        .route("/assets/app.js", get(js))
        // `/favicon.ico` too: a browser asks for it on its own (a 404 in every page's log).
        .route("/favicon.svg", get(favicon))
        .route("/favicon.ico", get(favicon))
        .route("/", get(handlers::runs))
        .route("/runs/{id}", get(handlers::run))
        .route("/start", get(handlers::start_page))
        .route("/epic", get(handlers::epic_board))
        .route("/sessions", get(handlers::sessions))
        .route("/sessions/{id}", get(handlers::session_page))
        .route("/queue", get(queue_setup::queue_or_setup))
        .route("/queue/units/{id}", get(queue::unit_page))
}

async fn css() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        APP_CSS,
    )
}

async fn js() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        APP_JS,
    )
}

async fn favicon() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "max-age=86400"),
        ],
        FAVICON,
    )
}
