//! Presentation of validation reports, as text for people and as JSON for scripts.

use crate::ui::color::{self, Stream};
use crate::ui::{Paint, visible, visible_line};
use baton_package::{Diagnostic, Report};
use serde_json::{Value, json};
use std::fmt::Write as _;

pub fn to_json(report: &Report) -> Value {
    let package = report.manifest.as_ref().map(|m| {
        let mut p = json!({
            "name": m.name,
            "version": m.version,
            "workflows": report.workflow_ids,
        });
        if let Some(pkg) = &report.package {
            p["sha256"] = json!(pkg.content_sha256());
            p["id"] = json!(pkg.install_id());
        }
        p
    });
    json!({
        "ok": report.ok(),
        "package": package,
        "errors": report.diagnostics.errors().collect::<Vec<_>>(),
        "warnings": report.diagnostics.warnings().collect::<Vec<_>>(),
    })
}

fn diagnostic_text(d: &Diagnostic, out: &mut String, colour: bool) {
    let (level, paint) = if d.is_error() {
        ("error", Paint::Bad)
    } else {
        ("warning", Paint::Warn)
    };
    let head = paint.when(colour, &format!("{level}[{}]", d.code));
    // A diagnostic quotes the package's own text: its escapes are shown, not sent.
    let _ = writeln!(out, "{head}: {}", visible(&d.message));
    if let Some(file) = &d.file {
        let mut loc = file.clone();
        if let Some(line) = d.line {
            let _ = write!(loc, ":{line}");
        }
        if let Some(p) = d.pointer.as_deref().filter(|p| !p.is_empty()) {
            let _ = write!(loc, " (#{p})");
        }
        let _ = writeln!(out, "  --> {}", visible_line(&loc));
    }
    if let Some(hint) = &d.hint {
        let _ = writeln!(
            out,
            "  {} {}",
            Paint::Hint.when(colour, "help:"),
            visible(hint)
        );
    }
}

/// The report as plain text.
pub fn to_text(report: &Report, shown_path: &str) -> String {
    to_text_coloured(report, shown_path, false)
}

/// The report on stderr, coloured when stderr is.
pub fn eprint(report: &Report, shown_path: &str) {
    eprint!(
        "{}",
        to_text_coloured(report, shown_path, color::enabled(Stream::Err))
    );
}

/// The report as text, with colour when `colour`.
pub fn to_text_coloured(report: &Report, shown_path: &str, colour: bool) -> String {
    let mut out = String::new();
    for d in report.diagnostics.all() {
        diagnostic_text(d, &mut out, colour);
        out.push('\n');
    }
    let errors = report.diagnostics.errors().count();
    let warnings = report.diagnostics.warnings().count();
    let plural = |n: usize, w: &str| {
        if n == 1 {
            format!("{n} {w}")
        } else {
            format!("{n} {w}s")
        }
    };
    match (&report.package, &report.manifest) {
        (Some(pkg), _) => {
            let flows: Vec<String> = pkg
                .workflows()
                .iter()
                .map(|w| format!("{} ({} nodes)", w.id, w.graph.nodes().len()))
                .collect();
            let _ = writeln!(
                out,
                "ok: {} {} is valid — {}: {}{}",
                pkg.name(),
                pkg.version(),
                plural(flows.len(), "workflow"),
                flows.join(", "),
                if warnings > 0 {
                    format!("; {}", plural(warnings, "warning"))
                } else {
                    String::new()
                }
            );
        }
        (None, Some(m)) => {
            let _ = writeln!(
                out,
                "invalid: {} {} has {} and {}",
                visible_line(&m.name),
                visible_line(&m.version),
                plural(errors, "error"),
                plural(warnings, "warning")
            );
        }
        (None, None) => {
            let _ = writeln!(
                out,
                "invalid: {} has {}",
                visible_line(shown_path),
                plural(errors, "error")
            );
        }
    }
    out
}
