//! The start page: a form for `POST /api/runs` (package, workflow, agent, project, model, and
//! an optional recorded trace to replay offline). app.js posts it and opens the new run.

use super::html::push_esc;

/// A choice offered in a field's suggestions: the value and what people read.
pub struct Suggestion {
    pub value: String,
    pub label: String,
}

pub struct View<'a> {
    /// Installed packages (their directory → `name version`).
    pub packages: &'a [Suggestion],
    /// Known project roots.
    pub projects: &'a [String],
    /// Prefilled values from the query (`?package=…&project=…`), e.g. from a link.
    pub defaults: &'a Defaults,
    /// Whether the server offers the bundled demo (`replay: "demo"`).
    pub demo: bool,
}

#[derive(Debug, Default, Clone)]
pub struct Defaults {
    pub package: String,
    pub workflow: String,
    pub agent: String,
    pub project: String,
    pub model: String,
    pub replay: String,
}

/// `(field, label, help, list id)`: the text fields of the form, in order.
const FIELDS: [(&str, &str, &str, &str); 6] = [
    (
        "package",
        "Package",
        "A package directory or .bmad file on this machine (installed packages are suggested).",
        "known-packages",
    ),
    (
        "workflow",
        "Workflow",
        "Empty: the package's default workflow.",
        "",
    ),
    ("agent", "Agent", "Empty: the workflow's default agent.", ""),
    (
        "project",
        "Project",
        "The project directory the run works in.",
        "known-projects",
    ),
    (
        "model",
        "Model",
        "Empty: the model of baton.toml or BATON_MODEL.",
        "",
    ),
    (
        "replay",
        "Replay a trace",
        "Optional: a recorded trace file answers instead of a model (offline).",
        "",
    ),
];

pub fn render(view: &View) -> String {
    let d = view.defaults;
    let mut out = String::with_capacity(4096);
    out.push_str("<h1>Start a run</h1>");
    if view.demo {
        out.push_str(
            "<section class=\"card\" aria-labelledby=\"demo-title\"><h2 id=\"demo-title\">Try it offline</h2>\
             <p>The bundled create-story example on a copy of the sample project, answered by its recorded trace: no model, no key.</p>\
             <form id=\"demo-form\" data-testid=\"demo-form\" class=\"start\" data-action=\"/api/runs\">\
             <input type=\"hidden\" data-field=\"replay\" value=\"demo\">\
             <div class=\"actions\"><button type=\"submit\" id=\"demo-submit\" data-testid=\"demo-submit\" class=\"primary\">Start the demo</button></div>\
             <p id=\"demo-status\" class=\"status\" role=\"status\" aria-live=\"polite\"></p></form></section>",
        );
    }
    out.push_str(
        "<section class=\"card\"><form id=\"start-form\" data-testid=\"start-form\" class=\"start\" data-action=\"/api/runs\"><div class=\"form-grid\">",
    );
    for (name, label, help, list) in FIELDS {
        let value = match name {
            "package" => &d.package,
            "workflow" => &d.workflow,
            "agent" => &d.agent,
            "project" => &d.project,
            "model" => &d.model,
            _ => &d.replay,
        };
        out.push_str("<div class=\"field\"><label for=\"start-");
        out.push_str(name);
        out.push_str("\">");
        out.push_str(label);
        out.push_str("</label><input id=\"start-");
        out.push_str(name);
        out.push_str("\" data-testid=\"start-");
        out.push_str(name);
        out.push_str("\" data-field=\"");
        out.push_str(name);
        out.push_str("\" aria-describedby=\"start-");
        out.push_str(name);
        out.push_str("-help\"");
        if !list.is_empty() {
            out.push_str(" list=\"");
            out.push_str(list);
            out.push('"');
        }
        if matches!(name, "package" | "project") {
            out.push_str(" required");
        }
        out.push_str(" value=\"");
        push_esc(&mut out, value);
        out.push_str("\"><small id=\"start-");
        out.push_str(name);
        out.push_str("-help\">");
        out.push_str(help);
        out.push_str("</small></div>");
    }
    out.push_str("</div><datalist id=\"known-packages\">");
    for p in view.packages {
        out.push_str("<option value=\"");
        push_esc(&mut out, &p.value);
        out.push_str("\">");
        push_esc(&mut out, &p.label);
        out.push_str("</option>");
    }
    out.push_str("</datalist><datalist id=\"known-projects\">");
    for p in view.projects {
        out.push_str("<option value=\"");
        push_esc(&mut out, p);
        out.push_str("\"></option>");
    }
    out.push_str(
        "</datalist><div class=\"actions\"><button type=\"submit\" id=\"start-submit\" data-testid=\"start-submit\" class=\"primary\">Start</button></div>\
         <p id=\"start-status\" class=\"status\" role=\"status\" aria-live=\"polite\"></p></form></section>",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_suggestions_and_defaults_are_escaped() {
        let defaults = Defaults {
            project: "/tmp/\"><script>".into(),
            ..Defaults::default()
        };
        let packages = [Suggestion {
            value: "pkg<1>".into(),
            label: "Name & 'v1'".into(),
        }];
        let html = render(&View {
            packages: &packages,
            projects: &["/p/<q>".to_string()],
            defaults: &defaults,
            demo: true,
        });
        assert!(!html.contains("<script"));
        assert!(html.contains("value=\"/tmp/&quot;&gt;&lt;script&gt;\""));
        assert!(html.contains("<option value=\"pkg&lt;1&gt;\">Name &amp; &#39;v1&#39;</option>"));
        assert!(html.contains("<option value=\"/p/&lt;q&gt;\">"));
        for f in ["package", "workflow", "agent", "project", "model", "replay"] {
            assert!(html.contains(&format!("id=\"start-{f}\"")), "{f}");
        }
        assert!(html.contains("id=\"demo-submit\""));
        assert!(html.contains("data-action=\"/api/runs\""));
    }
}
