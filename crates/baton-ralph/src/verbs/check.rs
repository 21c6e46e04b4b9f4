//! `check [--json]`: every finding of a session; exit 1 when one is an error.

use crate::Context;
use crate::check::{self, Scope};
use crate::discovery::{self, Pick};
use crate::error::Result;
use crate::verbs::Output;
use serde_json::{Value, json};

pub fn run(ctx: &Context, session: Option<&str>) -> Result<Output> {
    let loaded = discovery::find(ctx, session, Pick::Any)?;
    let doc = loaded.raw.as_ref().and_then(Value::as_object);
    let findings = check::check(ctx, doc, &loaded.issues, Scope::All);
    let (errors, warnings) = check::counts(&findings);
    let json = json!({
        "ok": errors == 0,
        "session_id": loaded.id,
        "errors": errors,
        "warnings": warnings,
        "findings": findings,
        "revision": doc.and_then(|d| d.get("revision")).cloned().unwrap_or(json!(0)),
    });
    let status = doc
        .and_then(|d| d.get("status"))
        .map_or("(unreadable)".to_string(), js_text);
    let steps = doc
        .and_then(|d| d.get("steps"))
        .and_then(Value::as_array)
        .map_or("?".to_string(), |s| s.len().to_string());
    let mut text = format!(
        "session: {}\nstatus:  {status}\nsteps:   {steps}\n\n",
        loaded.id
    );
    if findings.is_empty() {
        text.push_str("  ✓ no issues found\n");
    }
    for f in &findings {
        let mark = if f.level == check::Level::E {
            '✗'
        } else {
            '!'
        };
        text.push_str(&format!("  {mark} {}\n", f.line()));
    }
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    text.push_str(&format!(
        "\n  summary: {errors} error{}, {warnings} warning{}\n",
        plural(errors),
        plural(warnings)
    ));
    Ok(Output::new(json)
        .out(text)
        .exit(if errors == 0 { 0 } else { 1 }))
}

/// A JSON value as a JavaScript template literal shows it.
pub fn js_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}
