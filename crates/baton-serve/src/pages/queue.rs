//! The queue page (`/queue`, `baton serve --db URL`): units per state and per queue, leased
//! units with their worker, epoch and lease ages, units waiting for a person with their
//! question, the failed units with why, and the workers with their last heartbeat (and those
//! that stopped). Read with the same library call as `/api/queue` and `baton queue status`;
//! refreshed by polling (`data-poll`). Every unit number links to the unit's own page,
//! `/queue/units/<id>` ([`unit_page`]): its state, attempts, worker, failure and what was
//! submitted.
//!
//! Ids: `queue-live` (the refreshed section), `queue-database`, `count-<state>`,
//! `queue-expired`, `queue-queues`, `queue-leased` (rows `tr[data-unit]`), `queue-waiting`
//! (rows `tr[data-unit]`, the question in `.question-text`, the answer form
//! `answer-unit-<id>` with `answer-unit-<id>-text`), `queue-retrying` (rows
//! `tr[data-unit]`), `queue-failed` (rows `tr[data-unit]`, the code in `.failure-code`),
//! `queue-workers` (rows `tr[data-worker]`), `queue-stopped` (rows `tr[data-worker]`),
//! `queue-error` (the database could not be read: code, message, hint); unit links
//! `a.unit-link`. The unit page: `queue-unit` (a `dl`), `unit-failure` (code and message).

use super::html::{clip, phase_badge, push_esc};
use super::layout::{Nav, page};
use crate::api::queue::{DEFAULT_LIMIT, read_status};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use baton_queue::{Status, UnitState};
use baton_store::time::short_age;
use serde_json::Value;
use std::fmt::Write as _;

/// The characters of a question the page shows (model text can be long).
const QUESTION_CHARS: usize = 2000;
/// How often the page reads the queue again, in milliseconds.
const POLL_MS: u32 = 5000;

pub async fn queue_page(State(state): State<AppState>) -> Response {
    let (status, body) = match read_status(&state, DEFAULT_LIMIT).await {
        Ok(s) => (StatusCode::OK, render(&s)),
        Err(e) => (
            e.status,
            render_error(e.code, &e.message, e.hint.as_deref()),
        ),
    };
    let html = page("Queue", Nav::Queue, state.token.as_str(), &body);
    (status, Html(html)).into_response()
}

/// `/queue/units/{id}`: one unit — its state, epoch, attempts, worker, the code and message of
/// its failure, its result, and what was submitted — read under the server's bound.
pub async fn unit_page(State(state): State<AppState>, Path(id): Path<i64>) -> Response {
    let title = format!("Unit {id}");
    let read = match crate::api::queue::configured(&state) {
        Ok(config) => state
            .blocking
            .run_async(async move {
                let queue = baton_queue::Queue::open(&config).await?;
                queue.unit(id).await
            })
            .await
            .map_err(|e| crate::api::ApiError::from(&e))
            .and_then(|r| r.map_err(|e| crate::api::ApiError::from(&e))),
        Err(e) => Err(e),
    };
    let (status, body) = match read {
        Ok(unit) => (StatusCode::OK, render_unit(&unit)),
        Err(e) => (
            e.status,
            render_error(e.code, &e.message, e.hint.as_deref()),
        ),
    };
    let html = page(&title, Nav::Queue, state.token.as_str(), &body);
    (status, Html(html)).into_response()
}

/// A unit number as a link to its page.
fn unit_link(out: &mut String, id: i64) {
    let _ = write!(
        out,
        "<td><a class=\"unit-link\" href=\"/queue/units/{id}\">{id}</a></td>"
    );
}

fn row(out: &mut String, term: &str, value: &str) {
    let _ = write!(out, "<div><dt>{term}</dt><dd>");
    push_esc(out, value);
    out.push_str("</dd></div>");
}

/// One unit: pure, every value from the database escaped.
pub fn render_unit(u: &baton_queue::Unit) -> String {
    let mut out = String::with_capacity(2048);
    let _ = write!(
        out,
        "<div class=\"heading\"><h1>Unit {}</h1><a href=\"/queue\">← the queue</a></div>",
        u.id
    );
    let text = |v: Option<&Value>, k: &str| {
        v.and_then(|o| o.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if u.state == UnitState::Failed {
        let o = u.outcome.as_ref();
        let code = text(o, "code").or_else(|| text(o, "error"));
        out.push_str(
            "<div class=\"card error\" id=\"unit-failure\" role=\"alert\"><p>Failed: <code>",
        );
        push_esc(&mut out, code.as_deref().unwrap_or("(no code recorded)"));
        out.push_str("</code> ");
        push_esc(
            &mut out,
            &clip(&text(o, "message").unwrap_or_default(), QUESTION_CHARS),
        );
        out.push_str("</p></div>");
    }
    out.push_str("<section class=\"card\"><dl class=\"usage\" id=\"queue-unit\">");
    row(&mut out, "State", u.state.as_str());
    row(
        &mut out,
        "Kind",
        &format!("{} in queue {}", u.kind.as_str(), u.queue),
    );
    row(&mut out, "Epoch", &u.epoch.to_string());
    let attempts = match u.max_attempts {
        Some(max) => format!("{} of {max}", u.attempts),
        None => u.attempts.to_string(),
    };
    row(&mut out, "Attempts", &attempts);
    if let Some(owner) = &u.owner {
        let who = if u.state == UnitState::Leased {
            "Worker"
        } else {
            "Last worker"
        };
        row(&mut out, who, owner);
    }
    let o = u.outcome.as_ref();
    if let Some(branch) = text(o, "branch") {
        let commit = text(o, "commit").unwrap_or_default();
        row(
            &mut out,
            "Result",
            &format!("{branch} at {}", &commit[..commit.len().min(12)]),
        );
    }
    if let Some(run) = text(o, "runId").or_else(|| text(u.question.as_ref(), "runId")) {
        row(&mut out, "Run", &run);
    }
    if let Some(q) = text(u.question.as_ref(), "question") {
        row(&mut out, "Question", &clip(&q, QUESTION_CHARS));
    }
    row(
        &mut out,
        "Project",
        &format!(
            "{} at {}",
            baton_worker::read::redact_remote(&u.project_remote),
            &u.base_commit[..u.base_commit.len().min(12)]
        ),
    );
    let p = Some(&u.payload);
    if let Some(package) = text(p, "package") {
        let sha = u.package_sha256.as_deref().unwrap_or("");
        row(
            &mut out,
            "Package",
            &format!("{package} (sha256 {})", &sha[..sha.len().min(16)]),
        );
    }
    if let Some(w) = text(p, "workflow") {
        row(&mut out, "Workflow", &w);
    }
    if let Some(trace) = text(u.payload.get("replay"), "name") {
        row(&mut out, "Replays", &trace);
    }
    row(&mut out, "Submitted", &u.created_at);
    row(&mut out, "Updated", &u.updated_at);
    out.push_str(
        "</dl><p class=\"muted\">The run as its last checkpoint left it: <code>baton runs show ",
    );
    let _ = write!(out, "{}", u.id);
    out.push_str(" --db URL</code>; its log: <code>baton runs log ");
    let _ = write!(out, "{}", u.id);
    out.push_str(" --db URL</code>.</p></section>");
    out
}

fn age(seconds: f64) -> String {
    short_age(seconds.max(0.0) as u64)
}

/// The page when the queue could not be read; it polls, so it recovers when the database does.
pub fn render_error(code: &str, message: &str, hint: Option<&str>) -> String {
    let mut out = String::from("<div class=\"heading\"><h1>Queue</h1></div>");
    let _ = write!(
        out,
        "<div id=\"queue-live\" data-live data-poll=\"{POLL_MS}\">\
         <div class=\"card error\" id=\"queue-error\" role=\"alert\"><p>\
         The queue's database cannot be read: <code>"
    );
    push_esc(&mut out, code);
    out.push_str("</code> ");
    push_esc(&mut out, message);
    out.push_str("</p>");
    if let Some(h) = hint {
        out.push_str("<p class=\"muted\">");
        push_esc(&mut out, h);
        out.push_str("</p>");
    }
    out.push_str("</div></div>");
    out
}

/// The whole queue: pure, every value from the database escaped.
pub fn render(s: &Status) -> String {
    let mut out = String::with_capacity(4096);
    out.push_str(
        "<div class=\"heading\"><h1>Queue</h1><span class=\"path\" id=\"queue-database\">",
    );
    push_esc(&mut out, &s.database);
    let _ = write!(out, " · schema version {}</span></div>", s.schema_version);
    let _ = write!(
        out,
        "<div id=\"queue-live\" data-live data-poll=\"{POLL_MS}\">"
    );
    out.push_str("<section class=\"card\" aria-label=\"Units per state\"><dl class=\"usage\">");
    for state in UnitState::ALL {
        let _ = write!(
            out,
            "<div><dt>{}</dt><dd id=\"count-{}\">{}</dd></div>",
            state.as_str(),
            state.as_str(),
            s.counts.get(state)
        );
    }
    out.push_str("</dl></section>");
    if s.expired_unswept > 0 {
        let _ = write!(
            out,
            "<p class=\"warning\" id=\"queue-expired\">{} lease(s) expired and not yet taken \
             back (a worker's sweep does that)</p>",
            s.expired_unswept
        );
    }
    if s.queues.len() > 1 {
        queues(&mut out, s);
    }
    leased(&mut out, s);
    waiting(&mut out, s);
    retrying(&mut out, s);
    failed(&mut out, s);
    workers(&mut out, s);
    stopped(&mut out, s);
    out.push_str("</div>");
    out
}

fn table_start(out: &mut String, title: &str, id: &str, headers: &[&str]) {
    let _ = write!(
        out,
        "<section class=\"card\"><h2>{title}</h2><div class=\"table-wrap\"><table id=\"{id}\"><thead><tr>"
    );
    for h in headers {
        let _ = write!(out, "<th scope=\"col\">{h}</th>");
    }
    out.push_str("</tr></thead><tbody>");
}

fn cell(out: &mut String, text: &str) {
    out.push_str("<td>");
    push_esc(out, text);
    out.push_str("</td>");
}

fn queues(out: &mut String, s: &Status) {
    let mut headers = vec!["Queue"];
    headers.extend(UnitState::ALL.iter().map(|st| st.as_str()));
    table_start(out, "Per queue", "queue-queues", &headers);
    for q in &s.queues {
        out.push_str("<tr>");
        cell(out, &q.queue);
        for st in UnitState::ALL {
            cell(out, &q.counts.get(st).to_string());
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div></section>");
}

fn leased(out: &mut String, s: &Status) {
    if s.leased.is_empty() {
        out.push_str("<section class=\"card\"><h2>Leased</h2><p class=\"empty\" id=\"queue-leased-none\">No unit is leased.</p></section>");
        return;
    }
    table_start(
        out,
        "Leased",
        "queue-leased",
        &[
            "Unit",
            "Kind",
            "Queue",
            "Worker",
            "Epoch",
            "Held",
            "Heartbeat",
            "Expires in",
        ],
    );
    for l in &s.leased {
        let _ = write!(out, "<tr data-unit=\"{}\">", l.id);
        unit_link(out, l.id);
        cell(out, l.kind.as_str());
        cell(out, &l.queue);
        cell(out, &l.owner);
        cell(out, &l.epoch.to_string());
        cell(out, &age(l.lease_age_s));
        cell(out, &format!("{} ago", age(l.heartbeat_age_s)));
        if l.expires_in_s <= 0.0 {
            out.push_str("<td>");
            phase_badge(out, "expired");
            out.push_str("</td>");
        } else {
            cell(out, &format!("{:.0}s", l.expires_in_s.ceil()));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
    if s.counts.leased > s.leased.len() as i64 {
        let _ = write!(
            out,
            "<p class=\"muted\">The {} longest-held of {}.</p>",
            s.leased.len(),
            s.counts.leased
        );
    }
    out.push_str("</section>");
}

fn waiting(out: &mut String, s: &Status) {
    if s.waiting.is_empty() {
        out.push_str("<section class=\"card\"><h2>Waiting for a person</h2><p class=\"empty\" id=\"queue-waiting-none\">No unit waits for an answer.</p></section>");
        return;
    }
    table_start(
        out,
        "Waiting for a person",
        "queue-waiting",
        &["Unit", "Kind", "Queue", "Since", "Question"],
    );
    for w in &s.waiting {
        let _ = write!(out, "<tr data-unit=\"{}\">", w.id);
        unit_link(out, w.id);
        cell(out, w.kind.as_str());
        cell(out, &w.queue);
        cell(out, &age(w.waiting_s));
        out.push_str("<td><div class=\"question-text\">");
        let text = w.question_text().unwrap_or_default();
        push_esc(out, &clip(&text, QUESTION_CHARS));
        out.push_str("</div>");
        answer_form(out, w.id);
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table></div></section>");
}

/// The answer form of a waiting unit (app.js posts it with the token).
fn answer_form(out: &mut String, unit: i64) {
    let _ = write!(
        out,
        "<form class=\"queue-answer\" id=\"answer-unit-{unit}\" data-testid=\"answer-unit-{unit}\" \
         data-action=\"/api/queue/units/{unit}/answer\">\
         <label for=\"answer-unit-{unit}-text\">Answer</label>\
         <textarea id=\"answer-unit-{unit}-text\" rows=\"2\" required></textarea>\
         <div class=\"actions\"><button type=\"submit\" class=\"primary\">Answer</button></div>\
         <p class=\"status\" role=\"status\" aria-live=\"polite\"></p></form>"
    );
}

fn retrying(out: &mut String, s: &Status) {
    if s.retrying.is_empty() {
        return;
    }
    table_start(
        out,
        "Waiting for a retry",
        "queue-retrying",
        &[
            "Unit",
            "Kind",
            "Queue",
            "Attempts",
            "Ready in",
            "Last failure",
        ],
    );
    for r in &s.retrying {
        let _ = write!(out, "<tr data-unit=\"{}\">", r.id);
        unit_link(out, r.id);
        cell(out, r.kind.as_str());
        cell(out, &r.queue);
        let attempts = match r.max_attempts {
            Some(max) => format!("{} of {max}", r.attempts),
            None => r.attempts.to_string(),
        };
        cell(out, &attempts);
        cell(out, &age(r.ready_in_s));
        let text = |k: &str| r.reason.get(k).and_then(Value::as_str).unwrap_or("");
        let reason = match (text("code"), text("message")) {
            ("", "") => r.reason.to_string(),
            (code, message) => format!("{code}: {message}"),
        };
        cell(out, &clip(&reason, QUESTION_CHARS));
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div></section>");
}

fn failed(out: &mut String, s: &Status) {
    if s.failed.is_empty() {
        return;
    }
    table_start(
        out,
        "Failed",
        "queue-failed",
        &["Unit", "Kind", "Queue", "Attempts", "Failed", "Why"],
    );
    for f in &s.failed {
        let _ = write!(out, "<tr data-unit=\"{}\">", f.id);
        unit_link(out, f.id);
        cell(out, f.kind.as_str());
        cell(out, &f.queue);
        cell(out, &f.attempts.to_string());
        cell(out, &format!("{} ago", age(f.failed_s)));
        out.push_str("<td><code class=\"failure-code\">");
        push_esc(out, f.code.as_deref().unwrap_or("(no code)"));
        out.push_str("</code> ");
        push_esc(
            out,
            &clip(f.message.as_deref().unwrap_or(""), QUESTION_CHARS),
        );
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table></div>");
    if s.counts.failed > s.failed.len() as i64 {
        let _ = write!(
            out,
            "<p class=\"muted\">The {} most recent of {}.</p>",
            s.failed.len(),
            s.counts.failed
        );
    }
    out.push_str("</section>");
}

fn stopped(out: &mut String, s: &Status) {
    if s.stopped_workers.is_empty() {
        return;
    }
    table_start(
        out,
        "Stopped workers (last 24 hours)",
        "queue-stopped",
        &["Worker", "Host", "Stopped", "Started"],
    );
    for w in &s.stopped_workers {
        out.push_str("<tr data-worker=\"");
        push_esc(out, &w.id);
        out.push_str("\">");
        cell(out, &w.id);
        cell(out, &w.host);
        cell(out, &format!("{} ago ({})", age(w.stopped_s), w.stopped_at));
        cell(out, &w.started_at);
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div></section>");
}

fn workers(out: &mut String, s: &Status) {
    if s.workers.is_empty() {
        let said = match s.stopped_workers.first() {
            Some(w) => format!(
                "No worker is running; the last one, {}, stopped {} ago.",
                w.id,
                age(w.stopped_s)
            ),
            None => "No worker is running.".to_string(),
        };
        out.push_str(
            "<section class=\"card\"><h2>Workers</h2><p class=\"empty\" id=\"queue-workers-none\">",
        );
        push_esc(out, &said);
        out.push_str("</p></section>");
        return;
    }
    table_start(
        out,
        "Workers",
        "queue-workers",
        &["Worker", "Host", "Leases", "Last heartbeat", "Started"],
    );
    for w in &s.workers {
        out.push_str("<tr data-worker=\"");
        push_esc(out, &w.id);
        out.push_str("\">");
        cell(out, &w.id);
        cell(out, &w.host);
        cell(out, &w.leases.to_string());
        cell(out, &format!("{} ago", age(w.last_heartbeat_age_s)));
        cell(out, &w.started_at);
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div></section>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_queue::{
        Counts, FailedUnit, LeasedUnit, StoppedWorker, UnitKind, WaitingUnit, WorkerInfo,
    };
    use serde_json::json;

    fn status() -> Status {
        Status {
            database: "postgresql://u@h:5432/<db>".into(),
            schema_version: 1,
            counts: Counts {
                queued: 3,
                leased: 1,
                waiting: 1,
                done: 7,
                failed: 0,
                cancelled: 0,
            },
            queues: Vec::new(),
            leased: vec![LeasedUnit {
                id: 4,
                kind: UnitKind::Run,
                queue: "default".into(),
                owner: "host:1:<b>".into(),
                epoch: 2,
                attempts: 2,
                lease_age_s: 65.0,
                heartbeat_age_s: 3.0,
                expires_in_s: -1.0,
            }],
            waiting: vec![WaitingUnit {
                id: 9,
                kind: UnitKind::Run,
                queue: "default".into(),
                waiting_s: 10.0,
                since: "2026-01-01T00:00:00.000Z".into(),
                question: Some(
                    json!({"question": "<script>alert(1)</script> & go?", "runId": "r"}),
                ),
            }],
            retrying: Vec::new(),
            failed: vec![FailedUnit {
                id: 12,
                kind: UnitKind::Run,
                queue: "default".into(),
                attempts: 5,
                owner: Some("w1".into()),
                finished_at: "2026-01-01T00:00:00.000Z".into(),
                failed_s: 30.0,
                code: Some("LLM_UNREACHABLE".into()),
                message: Some("cannot reach <http://127.0.0.1:9/v1>".into()),
                run_id: None,
            }],
            stopped_workers: vec![StoppedWorker {
                id: "w-old".into(),
                host: "h".into(),
                started_at: "2026-01-01T00:00:00Z".into(),
                stopped_at: "2026-01-01T00:10:00Z".into(),
                stopped_s: 120.0,
            }],
            workers: vec![WorkerInfo {
                id: "w\"1".into(),
                host: "h".into(),
                started_at: "2026-01-01T00:00:00Z".into(),
                last_heartbeat_age_s: 2.0,
                leases: 1,
            }],
            expired_unswept: 1,
        }
    }

    #[test]
    fn the_queue_is_shown_with_every_text_escaped() {
        let html = render(&status());
        assert!(html.contains("<dd id=\"count-queued\">3</dd>"), "{html}");
        assert!(html.contains("<dd id=\"count-done\">7</dd>"));
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; go?"));
        assert!(!html.contains("<script>"));
        assert!(html.contains("host:1:&lt;b&gt;"));
        assert!(html.contains("data-worker=\"w&quot;1\""));
        assert!(html.contains("postgresql://u@h:5432/&lt;db&gt;"));
        assert!(html.contains("id=\"queue-expired\""));
        assert!(html.contains("phase-expired"));
        assert!(html.contains("data-action=\"/api/queue/units/9/answer\""));
        assert!(html.contains("<td>1m</td>"), "{html}");
        // Failed units with why; every unit number a link to its page.
        assert!(html.contains("id=\"queue-failed\""), "{html}");
        assert!(
            html.contains(
                "<code class=\"failure-code\">LLM_UNREACHABLE</code> cannot reach &lt;http"
            )
        );
        for id in [4, 9, 12] {
            assert!(
                html.contains(&format!(
                    "<a class=\"unit-link\" href=\"/queue/units/{id}\">{id}</a>"
                )),
                "{id}: {html}"
            );
        }
        assert!(html.contains("id=\"queue-stopped\""));
        assert!(html.contains("data-worker=\"w-old\""));
    }

    #[test]
    fn no_running_worker_says_which_stopped_and_when() {
        let mut s = status();
        s.workers.clear();
        let html = render(&s);
        assert!(
            html.contains("No worker is running; the last one, w-old, stopped 2m ago."),
            "{html}"
        );
    }

    #[test]
    fn a_failed_unit_page_says_why_escaped() {
        let unit = baton_queue::Unit {
            id: 12,
            kind: UnitKind::Run,
            queue: "default".into(),
            state: UnitState::Failed,
            payload: json!({"package": "create-story-micro", "workflow": "w",
                            "replay": {"sha256": "ab", "name": "run.trace.json"}}),
            package_sha256: Some("c4b5969816f1ce85aa".into()),
            project_remote: "https://ci:s3cret@git.example/app.git".into(),
            base_commit: "8c41e07a9b3d0000".into(),
            owner: Some("w1".into()),
            epoch: 5,
            attempts: 5,
            max_attempts: None,
            question: None,
            outcome: Some(json!({"code": "LLM_UNREACHABLE", "message": "<x>", "runId": "r-1"})),
            created_at: "a".into(),
            updated_at: "b".into(),
            lease_expires_at: None,
            finished_at: None,
        };
        let html = render_unit(&unit);
        assert!(
            html.contains("Failed: <code>LLM_UNREACHABLE</code> &lt;x&gt;"),
            "{html}"
        );
        assert!(html.contains("create-story-micro (sha256 c4b5969816f1ce85)"));
        assert!(html.contains("run.trace.json"));
        assert!(html.contains("https://ci@git.example/app.git at 8c41e07a9b3d"));
        assert!(!html.contains("s3cret"));
        assert!(html.contains("baton runs show 12 --db URL"));
    }

    #[test]
    fn an_error_says_what_failed_escaped() {
        let html = render_error(
            "QUEUE_DB_UNREACHABLE",
            "cannot reach <x>",
            Some("is it up?"),
        );
        assert!(html.contains("id=\"queue-error\""));
        assert!(html.contains("<code>QUEUE_DB_UNREACHABLE</code> cannot reach &lt;x&gt;"));
        assert!(html.contains("is it up?"));
    }
}
