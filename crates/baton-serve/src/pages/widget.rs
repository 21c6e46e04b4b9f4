//! The question a run waits on, as the widget it is. `waitingFor` is what the engine
//! recorded: `{question, nodeId, reason}`, plus `widget` (the validated `ui.ask_user`
//! request) when the model asked with a widget. Anything else is answered in free text.
//!
//! Every widget is one `<form id="answer-form" data-widget-type="…">`; app.js turns its
//! fields into the submission (`{text}`, or `{widget: {widgetId, type, value}}` for every
//! widget, a confirmation's value being `{confirmed}`)
//! and POSTs it with the bearer token to the form's `data-action`.

use super::html::{clip, esc, push_esc};
use serde_json::{Map, Value};
use std::fmt::Write as _;

/// Labels and options shown per widget; a hostile request cannot make a page of megabytes.
const TEXT_CHARS: usize = 2_000;
const MAX_CHOICES: usize = 100;

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn list<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .take(MAX_CHOICES)
}

/// The widget request of `waiting`, if it is one this page can draw.
fn widget_of(waiting: &Value) -> Option<&Value> {
    let w = waiting.get("widget").filter(|w| w.is_object())?;
    matches!(
        text(w, "type"),
        "confirmation" | "selection" | "form" | "feedback" | "action_selection" | "plan_review"
    )
    .then_some(w)
}

/// The `<section id="question">` of a run waiting on `waiting` since `asked_at` (the run's
/// last update), posting to `action`.
pub fn render(waiting: &Value, asked_at: &str, action: &str) -> String {
    let widget = widget_of(waiting);
    let kind = widget.map_or("text", |w| text(w, "type"));
    let message = widget
        .map(|w| text(w, "message"))
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| text(waiting, "question"));
    let mut out = String::with_capacity(1024);
    out.push_str("<section id=\"question\" class=\"card question\" aria-labelledby=\"question-title\" data-key=\"");
    // The key tells app.js whether a refreshed page shows a new ask (then it swaps the form)
    // or the same one (then it keeps what the person typed, or the answer being sent). The
    // same question asked again after an answer is a new ask: the run was updated between.
    push_esc(&mut out, &question_key(waiting, asked_at));
    out.push_str("\"><h2 id=\"question-title\">The run asks</h2>");
    if text(waiting, "reason") == "ENGINE_LOOP_DETECTED" {
        out.push_str("<p class=\"note\">The same tool call failed three times in a row.</p>");
    }
    out.push_str("<form id=\"answer-form\" data-testid=\"answer-form\" data-action=\"");
    push_esc(&mut out, action);
    let _ = write!(
        out,
        "\" data-widget-type=\"{}\" data-widget-id=\"",
        esc(kind)
    );
    push_esc(&mut out, widget.map_or("", |w| text(w, "widgetId")));
    out.push_str("\"><div id=\"question-text\" class=\"message\" data-testid=\"question-text\">");
    push_esc(&mut out, &clip(message, TEXT_CHARS * 4));
    out.push_str("</div>");
    match widget {
        Some(w) => match kind {
            "confirmation" => confirmation(&mut out),
            "selection" => selection(&mut out, w),
            "form" => form(&mut out, w),
            "feedback" => feedback(&mut out, w),
            "action_selection" => actions(&mut out, w),
            _ => plan_review(&mut out, w),
        },
        None => free_text(&mut out),
    }
    out.push_str("<p id=\"answer-status\" class=\"status\" role=\"status\" aria-live=\"polite\"></p></form></section>");
    out
}

/// Same ask, same key: when it was asked, the node, the reason and the text.
fn question_key(waiting: &Value, asked_at: &str) -> String {
    format!(
        "{asked_at}|{}|{}|{}",
        text(waiting, "nodeId"),
        text(waiting, "reason"),
        clip(text(waiting, "question"), 200)
    )
}

fn submit(out: &mut String, label: &str) {
    let _ = write!(
        out,
        "<div class=\"actions\"><button type=\"submit\" id=\"answer-submit\" data-testid=\"answer-submit\" class=\"primary\">{label}</button></div>"
    );
}

fn free_text(out: &mut String) {
    out.push_str(
        "<label for=\"answer-text\">Your answer</label>\
         <textarea id=\"answer-text\" data-testid=\"answer-text\" name=\"text\" rows=\"4\" required></textarea>",
    );
    submit(out, "Send answer");
}

fn confirmation(out: &mut String) {
    // Two submit buttons; app.js reads which one was pressed.
    out.push_str(
        "<div class=\"actions\">\
         <button type=\"submit\" id=\"answer-confirm\" data-testid=\"answer-confirm\" class=\"primary\" data-confirm=\"true\">Confirm</button>\
         <button type=\"submit\" id=\"answer-deny\" data-testid=\"answer-deny\" data-confirm=\"false\">Deny</button>\
         </div>",
    );
}

fn selection(out: &mut String, w: &Value) {
    let multi = w.get("multi").and_then(Value::as_bool) == Some(true);
    let input = if multi { "checkbox" } else { "radio" };
    out.push_str("<fieldset class=\"choices\"><legend>Choose");
    out.push_str(if multi { " one or more" } else { " one" });
    out.push_str("</legend>");
    for (i, option) in list(w, "options").enumerate() {
        let _ = write!(
            out,
            "<div class=\"choice\"><input type=\"{input}\" name=\"choice\" id=\"choice-{i}\" data-testid=\"choice-{i}\" value=\""
        );
        push_esc(out, text(option, "value"));
        out.push('"');
        if !multi && i == 0 {
            out.push_str(" required");
        }
        let _ = write!(out, "><label for=\"choice-{i}\">");
        push_esc(out, &clip(text(option, "label"), TEXT_CHARS));
        out.push_str("</label>");
        let description = text(option, "description");
        if !description.is_empty() {
            out.push_str("<small>");
            push_esc(out, &clip(description, TEXT_CHARS));
            out.push_str("</small>");
        }
        out.push_str("</div>");
    }
    out.push_str("</fieldset>");
    submit(out, "Send choice");
}

fn form(out: &mut String, w: &Value) {
    let empty = Map::new();
    let props = w
        .pointer("/schema/properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = w
        .pointer("/schema/required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (i, (name, prop)) in props.iter().take(MAX_CHOICES).enumerate() {
        let id = format!("field-{i}");
        let label = prop
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or(name.as_str());
        let req = if required.contains(&name.as_str()) {
            " required"
        } else {
            ""
        };
        let ty = text(prop, "type");
        out.push_str("<div class=\"field\">");
        let label_html = format!(
            "<label for=\"{id}\">{}{}</label>",
            esc(&clip(label, TEXT_CHARS)),
            if req.is_empty() {
                ""
            } else {
                " <span aria-hidden=\"true\">*</span>"
            }
        );
        let field_attrs = format!(
            "id=\"{id}\" data-testid=\"{id}\" data-field=\"{}\" data-type=\"{}\"{req}",
            esc(name),
            esc(ty)
        );
        if let Some(options) = prop.get("enum").and_then(Value::as_array) {
            out.push_str(&label_html);
            let _ = write!(out, "<select {field_attrs}>");
            for o in options.iter().take(MAX_CHOICES) {
                // The JSON of the value, so a number stays a number on the way back.
                let shown = o.as_str().map_or_else(|| o.to_string(), str::to_string);
                let _ = write!(
                    out,
                    "<option value=\"{}\">{}</option>",
                    esc(&o.to_string()),
                    esc(&clip(&shown, TEXT_CHARS))
                );
            }
            out.push_str("</select>");
        } else if ty == "boolean" {
            let _ = write!(out, "<input type=\"checkbox\" {field_attrs}>");
            out.push_str(&label_html);
        } else {
            out.push_str(&label_html);
            let input = match ty {
                "number" => "<input type=\"number\" step=\"any\" ",
                "integer" => "<input type=\"number\" step=\"1\" ",
                _ => "<input type=\"text\" ",
            };
            let _ = write!(out, "{input}{field_attrs}>");
        }
        let description = text(prop, "description");
        if !description.is_empty() {
            out.push_str("<small>");
            push_esc(out, &clip(description, TEXT_CHARS));
            out.push_str("</small>");
        }
        out.push_str("</div>");
    }
    submit(out, "Send form");
}

fn feedback(out: &mut String, w: &Value) {
    for (i, item) in list(w, "items").enumerate() {
        let _ = write!(
            out,
            "<div class=\"field feedback-item\"><blockquote id=\"item-{i}-content\">"
        );
        push_esc(out, &clip(text(item, "content"), TEXT_CHARS));
        let _ = write!(
            out,
            "</blockquote><label for=\"item-{i}\">Your feedback</label><textarea id=\"item-{i}\" data-testid=\"item-{i}\" data-field=\"{}\" rows=\"2\"></textarea></div>",
            esc(text(item, "id"))
        );
    }
    submit(out, "Send feedback");
}

fn actions(out: &mut String, w: &Value) {
    out.push_str("<div class=\"actions\">");
    for (i, action) in list(w, "actions").enumerate() {
        let _ = write!(
            out,
            "<button type=\"submit\" id=\"action-{i}\" data-testid=\"action-{i}\" data-action-id=\"{}\"",
            esc(text(action, "id"))
        );
        let description = text(action, "description");
        if !description.is_empty() {
            let _ = write!(out, " title=\"{}\"", esc(&clip(description, TEXT_CHARS)));
        }
        out.push('>');
        push_esc(out, &clip(text(action, "label"), TEXT_CHARS));
        out.push_str("</button>");
    }
    out.push_str("</div>");
}

fn plan_review(out: &mut String, w: &Value) {
    out.push_str("<pre class=\"plan\" id=\"plan-content\">");
    push_esc(out, &clip(text(w, "planContent"), TEXT_CHARS * 16));
    out.push_str(
        "</pre><label for=\"plan-feedback\">Changes you want (for “Request changes”)</label>\
         <textarea id=\"plan-feedback\" data-testid=\"plan-feedback\" rows=\"3\"></textarea>\
         <div class=\"actions\">\
         <button type=\"submit\" id=\"plan-approve\" data-testid=\"plan-approve\" class=\"primary\" data-decision=\"approve\">Approve</button>\
         <button type=\"submit\" id=\"plan-changes\" data-testid=\"plan-changes\" data-decision=\"request_changes\">Request changes</button>\
         </div>",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ACTION: &str = "/api/runs/r1/answer";

    fn render_at(waiting: &Value, action: &str) -> String {
        render(waiting, "2026-11-22T10:00:00Z", action)
    }

    #[test]
    fn the_key_changes_with_a_new_ask_of_the_same_question() {
        let w = json!({"question": "q?", "nodeId": "n", "reason": "r"});
        let first = render(&w, "2026-11-22T10:00:00Z", ACTION);
        let again = render(&w, "2026-11-22T10:05:00Z", ACTION);
        assert!(first.contains("data-key=\"2026-11-22T10:00:00Z|n|r|q?\""));
        assert_ne!(first, again);
    }

    fn waiting(widget: Value) -> Value {
        json!({"question": "q?", "nodeId": "n", "reason": "ui_ask_user", "widget": widget})
    }

    #[test]
    fn a_plain_question_is_free_text() {
        let html = render_at(
            &json!({"question": "<script>alert(1)</script> \"which\"?", "nodeId": "n", "reason": "assistant_no_toolCalls_and_not_complete"}),
            ACTION,
        );
        assert!(html.contains("data-widget-type=\"text\""));
        assert!(html.contains("id=\"answer-text\""));
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &quot;which&quot;?"));
        assert!(!html.contains("<script>"));
        assert!(html.contains("data-action=\"/api/runs/r1/answer\""));
    }

    #[test]
    fn confirmation_has_confirm_and_deny() {
        let html = render_at(
            &waiting(json!({"type": "confirmation", "widgetId": "w1", "message": "Apply?"})),
            ACTION,
        );
        assert!(html.contains("data-widget-type=\"confirmation\" data-widget-id=\"w1\""));
        assert!(html.contains("id=\"answer-confirm\"") && html.contains("id=\"answer-deny\""));
        assert!(html.contains(">Apply?<"));
    }

    #[test]
    fn selection_single_and_multi() {
        let w = json!({"type": "selection", "widgetId": "s", "message": "m",
            "options": [{"value": "a\"><script>", "label": "<i>A</i>", "description": "d"}, {"value": "b", "label": "B"}]});
        let html = render_at(&waiting(w.clone()), ACTION);
        assert_eq!(html.matches("type=\"radio\"").count(), 2);
        assert!(html.contains("value=\"a&quot;&gt;&lt;script&gt;\""));
        assert!(html.contains("&lt;i&gt;A&lt;/i&gt;"));
        let mut multi = w;
        multi["multi"] = json!(true);
        assert_eq!(
            render_at(&waiting(multi), ACTION)
                .matches("type=\"checkbox\"")
                .count(),
            2
        );
    }

    #[test]
    fn form_fields_per_type() {
        let w = json!({"type": "form", "widgetId": "f", "message": "m", "schema": {
            "properties": {
                "name": {"type": "string", "title": "Name"},
                "n": {"type": "integer"},
                "ok": {"type": "boolean"},
                "size": {"enum": ["S", "M", 3]}
            },
            "required": ["name"]}});
        let html = render_at(&waiting(w), ACTION);
        assert!(html.contains("type=\"text\" id=\"field-0\" data-testid=\"field-0\" data-field=\"name\" data-type=\"string\" required"));
        assert!(html.contains("type=\"number\" step=\"1\" id=\"field-1\""));
        assert!(html.contains("type=\"checkbox\" id=\"field-2\""));
        assert!(html.contains("<option value=\"&quot;S&quot;\">S</option>"));
        assert!(html.contains("<option value=\"3\">3</option>"));
    }

    #[test]
    fn feedback_actions_and_plan_review() {
        let fb = render_at(
            &waiting(
                json!({"type": "feedback", "message": "m", "items": [{"id": "i1", "content": "c<1>"}]}),
            ),
            ACTION,
        );
        assert!(fb.contains("data-field=\"i1\"") && fb.contains("c&lt;1&gt;"));
        let act = render_at(
            &waiting(
                json!({"type": "action_selection", "message": "m", "actions": [{"id": "go", "label": "Go", "description": "run 'it'"}]}),
            ),
            ACTION,
        );
        assert!(act.contains("data-action-id=\"go\" title=\"run &#39;it&#39;\">Go</button>"));
        let plan = render_at(
            &waiting(
                json!({"type": "plan_review", "message": "m", "planContent": "# Plan </pre><script>"}),
            ),
            ACTION,
        );
        assert!(
            plan.contains("data-decision=\"approve\"")
                && plan.contains("&lt;/pre&gt;&lt;script&gt;")
        );
    }

    #[test]
    fn an_unknown_widget_falls_back_to_free_text() {
        let html = render_at(&waiting(json!({"type": "hologram"})), ACTION);
        assert!(html.contains("data-widget-type=\"text\""));
        assert!(html.contains(">q?<"));
    }
}
