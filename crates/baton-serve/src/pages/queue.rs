//! The queue page (`/queue`, `baton serve --db URL`): units per state and per queue, leased
//! units with their worker, epoch and lease ages, units waiting for a person with their
//! question, and the workers with their last heartbeat. Read with the same library call as
//! `/api/queue` and `baton queue status`; refreshed by polling (`data-poll`).
//!
//! Ids: `queue-live` (the refreshed section), `queue-database`, `count-<state>`,
//! `queue-expired`, `queue-queues`, `queue-leased` (rows `tr[data-unit]`), `queue-waiting`
//! (rows `tr[data-unit]`, the question in `.question-text`, the answer form
//! `answer-unit-<id>` with `answer-unit-<id>-text`), `queue-retrying` (rows
//! `tr[data-unit]`), `queue-workers` (rows
//! `tr[data-worker]`), `queue-error` (the database could not be read: code, message, hint).

use super::html::{clip, phase_badge, push_esc};
use super::layout::{Nav, page};
use crate::api::queue::{DEFAULT_LIMIT, read_status};
use crate::state::AppState;
use axum::extract::State;
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
    workers(&mut out, s);
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
        cell(out, &l.id.to_string());
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
        cell(out, &w.id.to_string());
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
        cell(out, &r.id.to_string());
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

fn workers(out: &mut String, s: &Status) {
    if s.workers.is_empty() {
        out.push_str("<section class=\"card\"><h2>Workers</h2><p class=\"empty\" id=\"queue-workers-none\">No worker has registered.</p></section>");
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
    use baton_queue::{Counts, LeasedUnit, UnitKind, WaitingUnit, WorkerInfo};
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
