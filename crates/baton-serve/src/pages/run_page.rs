//! The page of one run: its facts, the graph with each node's status, the question it waits
//! on as a widget, the conversation, the artifacts (previewed through the API's artifact
//! endpoint), the usage and the live timeline (app.js follows `/api/runs/{id}/events`).
//!
//! app.js refreshes the page's live sections (`data-live`) by fetching this page again when an
//! event arrives, so what the page shows always comes from this one renderer.

use super::graph_svg;
use super::html::{clip, esc, phase_badge, push_esc, url_part};
use super::widget;
use baton_package::graph::Graph;
use baton_store::{NodeStatus, Phase, RunKind, RunMetadata};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

/// Messages of the conversation shown (the newest); older ones are summarized by a count.
pub const CONVERSATION_MESSAGES: usize = 200;
/// Characters of one message shown.
const MESSAGE_CHARS: usize = 6_000;
/// Artifacts listed.
const ARTIFACTS: usize = 200;

pub struct View<'a> {
    pub run: &'a RunMetadata,
    pub project_root: &'a Path,
    pub interrupted: bool,
    /// Whether a process holds the run's driver lock right now (the timeline says "Live."
    /// only then).
    pub driven: bool,
    /// The workflow graph of the pinned package (none for a task run, or when unreadable).
    pub graph: Option<&'a Graph>,
    /// `[{nodeId, type, title, status}]` per node, as `runs show --json` reports it.
    pub progress: &'a [Value],
    pub artifacts: &'a [&'a str],
    /// Records of `logs/conversation.jsonl` (`{kind: "messages", reset, messages}`).
    pub conversation: &'a [Value],
    /// Why part of the run could not be shown (state unreadable, package missing, …).
    pub note: Option<&'a str>,
}

pub fn render(view: &View) -> String {
    let r = view.run;
    let id = url_part(&r.run_id);
    let phase = if view.interrupted {
        "interrupted"
    } else {
        r.phase.as_str()
    };
    let mut out = String::with_capacity(16 * 1024);
    let _ = write!(
        out,
        "<div id=\"run\" data-run-id=\"{}\" data-events=\"/api/runs/{}/events\" data-driven=\"{}\">",
        esc(&r.run_id),
        esc(&id),
        view.driven
    );
    out.push_str("<div class=\"heading\"><h1>Run <span class=\"mono\">");
    push_esc(&mut out, r.run_id.get(..13).unwrap_or(&r.run_id));
    out.push_str("</span></h1>");
    let _ = write!(
        out,
        "<div id=\"run-phase\" data-testid=\"run-phase\" data-live data-phase=\"{}\">",
        esc(phase)
    );
    phase_badge(&mut out, phase);
    out.push_str("</div></div>");
    if let Some(note) = view.note {
        out.push_str("<p class=\"warning\" role=\"alert\">");
        push_esc(&mut out, note);
        out.push_str("</p>");
    }
    out.push_str("<div class=\"run-grid\"><div>");
    // The question first: it is what a person came for.
    out.push_str("<div id=\"question-slot\" data-live>");
    if r.phase == Phase::WaitingUser
        && let Some(w) = &r.waiting_for
    {
        out.push_str(&widget::render(
            w,
            &r.last_updated_at,
            &format!("/api/runs/{id}/answer"),
        ));
    } else if let Some(f) = baton_store::next_step::failure(r) {
        // The error with its hint and the command that goes on, as `baton runs show` says.
        let title = if r.phase == Phase::Failed {
            "Failed"
        } else {
            "Stopped"
        };
        let _ = write!(
            out,
            "<section class=\"card error\" id=\"run-error\" role=\"alert\"><h2>{title}</h2><p><code>"
        );
        push_esc(&mut out, &f.code);
        out.push_str("</code> ");
        push_esc(&mut out, &clip(&f.message, MESSAGE_CHARS));
        out.push_str("</p>");
        if let Some(hint) = &f.hint {
            out.push_str("<p id=\"run-hint\">");
            push_esc(&mut out, &clip(hint, MESSAGE_CHARS));
            out.push_str("</p>");
        }
        next_step(&mut out, r, view.interrupted);
        out.push_str("</section>");
    }
    out.push_str("</div>");
    graph_card(&mut out, view);
    conversation_card(&mut out, view.conversation);
    out.push_str("</div><div>");
    facts_card(&mut out, view, phase);
    out.push_str(
        "<section class=\"card\" aria-labelledby=\"usage-title\"><h2 id=\"usage-title\">Usage</h2>\
         <dl id=\"usage\" class=\"usage\" data-testid=\"usage\">\
         <div><dt>Model calls</dt><dd id=\"usage-turns\">0</dd></div>\
         <div><dt>Tool calls</dt><dd id=\"usage-tools\">0</dd></div>\
         <div><dt>Prompt tokens</dt><dd id=\"usage-prompt\">0</dd></div>\
         <div><dt>Cached prompt tokens</dt><dd id=\"usage-cached\">0</dd></div>\
         <div id=\"usage-written-row\" hidden><dt>Written to cache</dt><dd id=\"usage-written\">0</dd></div>\
         <div><dt>Completion tokens</dt><dd id=\"usage-completion\">0</dd></div>\
         <div><dt>Total tokens</dt><dd id=\"usage-total\">0</dd></div>\
         <div><dt>Cost</dt><dd id=\"usage-cost\">—</dd></div></dl>\
         <p class=\"muted\"><small>Summed from the run's audit log as it streams in.</small></p></section>",
    );
    artifacts_card(&mut out, view, &id);
    out.push_str(
        "<section class=\"card\" aria-labelledby=\"timeline-title\"><h2 id=\"timeline-title\">Timeline</h2>\
         <p id=\"timeline-status\" class=\"status\" role=\"status\">Connecting…</p>\
         <ol id=\"timeline\" class=\"timeline\" data-testid=\"timeline\" aria-live=\"off\"></ol></section>",
    );
    out.push_str("</div></div></div>");
    out
}

/// What a person does next (`baton_store::next_step`), the command set apart to copy.
fn next_step(out: &mut String, r: &RunMetadata, interrupted: bool) {
    let Some(next) = baton_store::next_step::next_step(r, interrupted) else {
        return;
    };
    out.push_str("<p id=\"run-next\" class=\"next\" data-testid=\"run-next\">Next: ");
    match next.split_once("baton ") {
        Some((words, command)) => {
            push_esc(out, words);
            out.push_str("<code>baton ");
            push_esc(out, command);
            out.push_str("</code>");
        }
        None => push_esc(out, &next),
    }
    out.push_str("</p>");
}

fn facts_card(out: &mut String, view: &View, phase: &str) {
    let r = view.run;
    out.push_str("<section id=\"run-facts\" class=\"card\" data-live aria-labelledby=\"facts-title\"><h2 id=\"facts-title\">Run</h2><dl class=\"facts\">");
    let mut fact = |label: &str, value: &str, mono: bool| {
        out.push_str("<dt>");
        out.push_str(label);
        out.push_str(if mono {
            "</dt><dd class=\"mono\">"
        } else {
            "</dt><dd>"
        });
        push_esc(out, value);
        out.push_str("</dd>");
    };
    fact("Id", &r.run_id, true);
    fact("Phase", phase, false);
    if r.kind == RunKind::Task {
        fact("Task", &r.workflow_ref, false);
    } else {
        fact("Workflow", &r.workflow_ref, false);
        fact("Package", &r.package_id, false);
    }
    fact("Agent", &r.active_agent_id, false);
    fact("Node", r.current_node_id.as_deref().unwrap_or("—"), true);
    fact("Project", &view.project_root.display().to_string(), true);
    fact("Created", &r.created_at, false);
    fact("Updated", &r.last_updated_at, false);
    out.push_str("</dl>");
    if view.interrupted {
        next_step(out, r, true);
    }
    out.push_str("</section>");
}

fn graph_card(out: &mut String, view: &View) {
    out.push_str("<section id=\"graph-card\" class=\"card\" data-live aria-labelledby=\"graph-heading\"><h2 id=\"graph-heading\">Workflow</h2>");
    match view.graph {
        Some(g) => {
            let nodes: Vec<(&str, NodeStatus, &str)> = view
                .progress
                .iter()
                .map(|p| {
                    let id = p.get("nodeId").and_then(Value::as_str).unwrap_or("");
                    let title = p
                        .get("title")
                        .and_then(Value::as_str)
                        .filter(|t| !t.is_empty())
                        .unwrap_or(id);
                    (id, node_status(p), title)
                })
                .collect();
            let status: HashMap<&str, NodeStatus> =
                nodes.iter().map(|(id, st, _)| (*id, *st)).collect();
            out.push_str("<div class=\"graph-wrap\">");
            out.push_str(&graph_svg::render(g, &status));
            out.push_str("</div>");
            let done = nodes
                .iter()
                .filter(|(_, st, _)| *st == NodeStatus::Completed)
                .count();
            let _ = write!(
                out,
                "<p class=\"muted\" id=\"progress-count\">{done} of {} nodes completed</p>",
                nodes.len()
            );
            // The same states as text, for screen readers and for people who prefer a list.
            out.push_str("<ol id=\"progress-list\" class=\"progress-list\">");
            for (id, st, title) in &nodes {
                let class = match st {
                    NodeStatus::Completed => "completed",
                    NodeStatus::Current => "current",
                    NodeStatus::Pending => "pending",
                };
                let _ = write!(out, "<li class=\"{class}\" data-node-id=\"{}\">", esc(id));
                push_esc(out, title);
                let _ = write!(out, " <span class=\"muted\">({class})</span></li>");
            }
            out.push_str("</ol>");
        }
        None if view.run.kind == RunKind::Task => {
            out.push_str("<p class=\"muted\">A task run follows no workflow graph.</p>");
        }
        None => out.push_str("<p class=\"muted\">The workflow graph is not available.</p>"),
    }
    out.push_str("</section>");
}

fn node_status(p: &Value) -> NodeStatus {
    match p.get("status").and_then(Value::as_str) {
        Some("completed") => NodeStatus::Completed,
        Some("current") => NodeStatus::Current,
        _ => NodeStatus::Pending,
    }
}

fn artifacts_card(out: &mut String, view: &View, id: &str) {
    out.push_str("<section id=\"artifacts-card\" class=\"card\" data-live aria-labelledby=\"artifacts-title\"><h2 id=\"artifacts-title\">Artifacts</h2>");
    if view.artifacts.is_empty() {
        out.push_str("<p class=\"muted\" id=\"artifacts-empty\">None yet.</p>");
    } else {
        out.push_str("<ul class=\"artifacts\" id=\"artifacts\">");
        for (i, a) in view.artifacts.iter().take(ARTIFACTS).enumerate() {
            // The URL is made here (each segment encoded), not by the script from the name.
            // Artifacts are project-relative: they are read through the `@project` mount.
            let mounted = a.strip_prefix("@project/").unwrap_or(a);
            let href = format!(
                "/api/runs/{id}/artifacts/@project/{}",
                mounted
                    .split('/')
                    .map(url_part)
                    .collect::<Vec<_>>()
                    .join("/")
            );
            let _ = write!(
                out,
                "<li><button type=\"button\" id=\"artifact-{i}\" data-testid=\"artifact-{i}\" class=\"artifact\" data-href=\"{}\" aria-controls=\"artifact-preview\">",
                esc(&href)
            );
            push_esc(out, a);
            out.push_str("</button></li>");
        }
        out.push_str("</ul>");
    }
    out.push_str("<pre id=\"artifact-preview\" class=\"preview\" data-testid=\"artifact-preview\" hidden></pre></section>");
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A person's words: a user message the engine wrapped as `USER_INPUT` (an answer or a chat
/// message), without that header and its `- forNodeId:` line. `None` for every other
/// user-role message: those are baton's own instructions (`RUN_DIRECTIVE`, `NODE_BRIEF`,
/// reminders, a task's prompt, a summary of earlier turns).
fn person_text(content: &str) -> Option<&str> {
    let rest = content.strip_prefix("USER_INPUT")?;
    let rest = rest.strip_prefix('\n').unwrap_or(rest);
    Some(match rest.strip_prefix("- forNodeId:") {
        Some(tail) => tail.split_once('\n').map_or("", |(_, answer)| answer),
        None => rest,
    })
}

/// One of baton's own instructions, folded under its first line (`RUN_DIRECTIVE`, …): the
/// model reads them as user-role messages, but no person wrote them.
fn baton_message(out: &mut String, content: &str) {
    let first = content.lines().map(str::trim).find(|l| !l.is_empty());
    out.push_str("<details class=\"msg baton\" data-from=\"baton\"><summary><span class=\"who\">baton</span> ");
    push_esc(out, &clip(first.unwrap_or("instruction"), 80));
    out.push_str("</summary><div class=\"body\">");
    push_esc(out, &clip(content, MESSAGE_CHARS));
    out.push_str("</div></details>");
}

/// A string of a tool's answer shown as text of its own: several lines, or long.
fn is_text(v: &str) -> bool {
    v.contains('\n') || v.chars().count() > 80
}

/// The text fields of a tool's JSON answer (`content` of `fs.read`, a command's `stdout`, an
/// error's `message`…), with where they are (`content`, `error.message`), at most two deep.
fn text_fields<'v>(v: &'v Value, at: &str, depth: usize, found: &mut Vec<(String, &'v str)>) {
    match v {
        Value::String(text) if is_text(text) => found.push((at.to_string(), text)),
        Value::Object(map) if depth < 2 => {
            for (key, value) in map {
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                text_fields(value, &path, depth + 1, found);
            }
        }
        _ => {}
    }
}

/// A tool's answer: text as text (its real line breaks), the JSON folded below it, pretty.
/// An answer that is no JSON is shown as it is.
fn tool_result(out: &mut String, content: &str) {
    let parsed: Option<Value> = serde_json::from_str(content)
        .ok()
        .filter(|v: &Value| v.is_object() || v.is_array());
    let Some(v) = parsed else {
        if !content.is_empty() {
            out.push_str("<div class=\"body\">");
            push_esc(out, &clip(content, MESSAGE_CHARS));
            out.push_str("</div>");
        }
        return;
    };
    match (
        v.get("ok").and_then(Value::as_bool),
        v.pointer("/error/code"),
    ) {
        (Some(false), code) => {
            out.push_str("<p class=\"tool-status failed\">failed");
            if let Some(code) = code.and_then(Value::as_str) {
                out.push_str(" <code>");
                push_esc(out, &clip(code, 80));
                out.push_str("</code>");
            }
            out.push_str("</p>");
        }
        (Some(true), _) => out.push_str("<p class=\"tool-status ok\">ok</p>"),
        _ => {}
    }
    let mut texts = Vec::new();
    text_fields(&v, "", 0, &mut texts);
    for (at, text) in texts {
        out.push_str("<div class=\"tool-text\"><small class=\"muted\">");
        push_esc(out, &at);
        out.push_str("</small><div class=\"body\" data-field=\"");
        push_esc(out, &at);
        out.push_str("\">");
        push_esc(out, &clip(text, MESSAGE_CHARS));
        out.push_str("</div></div>");
    }
    let pretty = serde_json::to_string_pretty(&v).unwrap_or_else(|_| content.to_string());
    out.push_str("<details class=\"tool-json\"><summary>JSON</summary><pre class=\"body\">");
    push_esc(out, &clip(&pretty, MESSAGE_CHARS));
    out.push_str("</pre></details>");
}

fn conversation_card(out: &mut String, records: &[Value]) {
    out.push_str("<section id=\"conversation-card\" class=\"card\" data-live aria-labelledby=\"conversation-title\"><h2 id=\"conversation-title\">Conversation</h2>");
    // (reset before this message, message) in order.
    let mut messages: Vec<(bool, &Value)> = Vec::new();
    for record in records {
        let reset = record.get("reset").and_then(Value::as_bool) == Some(true);
        let list = record.get("messages").and_then(Value::as_array);
        for (i, m) in list.into_iter().flatten().enumerate() {
            messages.push((reset && i == 0, m));
        }
    }
    if messages.is_empty() {
        out.push_str("<p class=\"muted\">No messages yet.</p></section>");
        return;
    }
    let hidden = messages.len().saturating_sub(CONVERSATION_MESSAGES);
    out.push_str("<div id=\"conversation\" class=\"conversation\" data-testid=\"conversation\">");
    if hidden > 0 {
        let _ = write!(
            out,
            "<p class=\"muted\">{hidden} older messages are not shown.</p>"
        );
    }
    for (reset, m) in &messages[hidden..] {
        if *reset {
            out.push_str("<div class=\"msg reset\">history restarted</div>");
        }
        let role = m.get("role").and_then(Value::as_str).unwrap_or("unknown");
        let role_class = match role {
            "system" | "user" | "assistant" | "tool" => role,
            _ => "other",
        };
        let content = m.get("content").map(text_of).unwrap_or_default();
        if role == "user" {
            if let Some(answer) = person_text(&content) {
                out.push_str("<article class=\"msg user\" data-from=\"person\"><header>you</header><div class=\"body\">");
                push_esc(out, &clip(answer, MESSAGE_CHARS));
                out.push_str("</div></article>");
            } else {
                baton_message(out, &content);
            }
            continue;
        }
        if role == "system" {
            // Long and the same every node: folded.
            out.push_str("<details class=\"msg system\"><summary>System prompt</summary><div class=\"body\">");
            push_esc(out, &clip(&content, MESSAGE_CHARS));
            out.push_str("</div></details>");
            continue;
        }
        let _ = write!(
            out,
            "<article class=\"msg {role_class}\"><header>{role_class}"
        );
        if let Some(call) = m.get("toolCallId").and_then(Value::as_str) {
            out.push_str(" · ");
            push_esc(out, &clip(call, 60));
        }
        out.push_str("</header>");
        if role == "tool" {
            tool_result(out, &content);
        } else if !content.is_empty() {
            out.push_str("<div class=\"body\">");
            push_esc(out, &clip(&content, MESSAGE_CHARS));
            out.push_str("</div>");
        }
        for call in m
            .get("toolCalls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.push_str("<div class=\"call\">→ ");
            push_esc(
                out,
                &clip(call.get("name").and_then(Value::as_str).unwrap_or("?"), 80),
            );
            out.push(' ');
            push_esc(
                out,
                &clip(
                    call.get("arguments").and_then(Value::as_str).unwrap_or(""),
                    400,
                ),
            );
            out.push_str("</div>");
        }
        out.push_str("</article>");
    }
    out.push_str("</div></section>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_package::model::GraphDoc;
    use serde_json::json;

    fn run(phase: &str, waiting: Option<Value>) -> RunMetadata {
        let mut v = json!({
            "runId": "0196abcd-<x>", "projectId": "p", "packageId": "pkg<1>", "packageSha256": "00",
            "workflowRef": "create-story", "activeAgentId": "sm", "phase": phase,
            "createdAt": "2026-11-22T10:00:00Z", "lastUpdatedAt": "2026-11-22T10:01:00Z",
            "currentNodeId": "b",
        });
        if let Some(w) = waiting {
            v["waitingFor"] = w;
        }
        serde_json::from_value(v).unwrap()
    }

    fn graph() -> Graph {
        Graph::new(
            serde_json::from_value::<GraphDoc>(json!({
                "schemaVersion": "1.1", "entryNodeId": "a",
                "nodes": [{"id": "a", "type": "step", "file": "a.md", "title": "Select"},
                          {"id": "b", "type": "step", "file": "b.md"},
                          {"id": "c", "type": "end", "file": "c.md"}],
                "edges": [{"from": "a", "to": "b", "label": "next"}, {"from": "b", "to": "c", "label": "next"}]
            }))
            .unwrap(),
        )
    }

    #[test]
    fn a_waiting_run_shows_its_widget_graph_and_hostile_text_escaped() {
        let g = graph();
        let r = run(
            "waiting-user",
            Some(
                json!({"question": "Which story? <img src=x onerror=alert(1)>", "nodeId": "b", "reason": "q"}),
            ),
        );
        let progress = vec![
            json!({"nodeId": "a", "type": "step", "title": "Select", "status": "completed"}),
            json!({"nodeId": "b", "type": "step", "status": "current"}),
            json!({"nodeId": "c", "type": "end", "status": "pending"}),
        ];
        let conversation = vec![
            json!({"kind": "messages", "reset": false, "messages": [
                {"role": "system", "content": "sys"},
                {"role": "assistant", "content": "<script>steal()</script>", "toolCalls": [{"id": "c1", "name": "fs.read", "arguments": "{\"path\":\"</div>\"}"}]},
                {"role": "tool", "toolCallId": "c1", "content": "ok \"quoted\""}
            ]}),
            json!({"kind": "messages", "reset": true, "messages": [{"role": "user", "content": "hi"}]}),
        ];
        let artifacts = ["artifacts/<story>.md", "a b/c?.md"];
        let html = render(&View {
            run: &r,
            project_root: Path::new("/p"),
            interrupted: false,
            driven: false,
            graph: Some(&g),
            progress: &progress,
            artifacts: &artifacts,
            conversation: &conversation,
            note: None,
        });
        assert!(!html.contains("<script") && !html.contains("<img"));
        assert!(html.contains("id=\"answer-form\""));
        assert!(html.contains("data-action=\"/api/runs/0196abcd-%3Cx%3E/answer\""));
        assert!(html.contains("data-events=\"/api/runs/0196abcd-%3Cx%3E/events\""));
        assert!(html.contains("data-node-id=\"a\" data-status=\"completed\""));
        assert!(html.contains("data-node-id=\"b\" data-status=\"current\""));
        assert!(html.contains("1 of 3 nodes completed"));
        assert!(html.contains("&lt;script&gt;steal()&lt;/script&gt;"));
        assert!(html.contains("&lt;/div&gt;"));
        assert!(html.contains("history restarted"));
        assert!(html.contains(
            "data-href=\"/api/runs/0196abcd-%3Cx%3E/artifacts/@project/artifacts/%3Cstory%3E.md\""
        ));
        assert!(
            html.contains(
                "data-href=\"/api/runs/0196abcd-%3Cx%3E/artifacts/@project/a%20b/c%3F.md\""
            )
        );
        assert!(html.contains(">artifacts/&lt;story&gt;.md<"));
        assert!(html.contains("pkg&lt;1&gt;"));
    }

    #[test]
    fn a_failed_task_run_shows_the_error_and_no_graph() {
        let mut r = run(
            "failed",
            Some(json!({"error": {"code": "E_X", "message": "<b>bad</b>"}})),
        );
        r.kind = RunKind::Task;
        let html = render(&View {
            run: &r,
            project_root: Path::new("/p"),
            interrupted: false,
            driven: false,
            graph: None,
            progress: &[],
            artifacts: &[],
            conversation: &[],
            note: Some("state <unreadable>"),
        });
        assert!(html.contains("id=\"run-error\""));
        assert!(html.contains("&lt;b&gt;bad&lt;/b&gt;"));
        assert!(html.contains("A task run follows no workflow graph."));
        assert!(html.contains("state &lt;unreadable&gt;"));
        assert!(!html.contains("answer-form"));
        assert!(html.contains("data-phase=\"failed\""));
        // What goes on, as `baton runs show` says it.
        assert!(html.contains(
            "<p id=\"run-next\" class=\"next\" data-testid=\"run-next\">Next: the run is kept; retry with: <code>baton resume 0196abcd-&lt;x&gt;</code></p>"
        ));
        // The cache-write row waits hidden until app.js sums some.
        assert!(html.contains(
            "<div id=\"usage-written-row\" hidden><dt>Written to cache</dt><dd id=\"usage-written\">0</dd></div>"
        ));
    }

    #[test]
    fn a_tool_answer_shows_its_text_as_text_and_its_json_folded() {
        let mut out = String::new();
        tool_result(
            &mut out,
            r#"{"ok":true,"path":"a.md","content":"line 1\nline <2>"}"#,
        );
        assert!(out.contains("<p class=\"tool-status ok\">ok</p>"), "{out}");
        assert!(
            out.contains("data-field=\"content\">line 1\nline &lt;2&gt;</div>"),
            "{out}"
        );
        assert!(out.contains("<details class=\"tool-json\"><summary>JSON</summary>"));
        assert!(!out.contains("<details class=\"tool-json\" open"));
        let mut failed = String::new();
        tool_result(
            &mut failed,
            r#"{"ok":false,"error":{"code":"ENOENT","message":"no such file"}}"#,
        );
        assert!(failed.contains("failed <code>ENOENT</code>"), "{failed}");
        let mut plain = String::new();
        tool_result(&mut plain, "not json <x>");
        assert_eq!(plain, "<div class=\"body\">not json &lt;x&gt;</div>");
    }

    #[test]
    fn baton_instructions_are_folded_and_a_persons_answer_is_theirs() {
        let mut out = String::new();
        conversation_card(
            &mut out,
            &[json!({"kind": "messages", "messages": [
                {"role": "user", "content": "RUN_DIRECTIVE\n- runType: bmad-micro\n- <x>"},
                {"role": "user", "content": "Reminder: b requires fs.write"},
                {"role": "user", "content": "USER_INPUT\n- forNodeId: b\n1-2 <login>"},
                {"role": "user", "content": "USER_INPUT\nhello"}
            ]})],
        );
        assert!(out.contains(
            "<details class=\"msg baton\" data-from=\"baton\"><summary><span class=\"who\">baton</span> RUN_DIRECTIVE</summary><div class=\"body\">RUN_DIRECTIVE\n- runType: bmad-micro\n- &lt;x&gt;</div></details>"
        ));
        assert!(
            out.contains(
                "<span class=\"who\">baton</span> Reminder: b requires fs.write</summary>"
            )
        );
        assert!(out.contains(
            "<article class=\"msg user\" data-from=\"person\"><header>you</header><div class=\"body\">1-2 &lt;login&gt;</div></article>"
        ));
        assert!(out.contains("<header>you</header><div class=\"body\">hello</div>"));
        assert!(!out.contains("USER_INPUT"));
    }

    #[test]
    fn a_long_conversation_shows_only_the_newest_messages() {
        let messages: Vec<Value> = (0..CONVERSATION_MESSAGES + 5)
            .map(|i| json!({"role": "user", "content": format!("m{i}")}))
            .collect();
        let mut out = String::new();
        conversation_card(
            &mut out,
            &[json!({"kind": "messages", "messages": messages})],
        );
        assert!(out.contains("5 older messages are not shown."));
        assert!(!out.contains(">m4<"));
        assert!(out.contains(">m5<"));
    }
}
