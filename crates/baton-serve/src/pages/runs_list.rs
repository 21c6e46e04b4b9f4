//! The runs page: a filter form, one table row per run (newest first), and a link to the
//! next page (the listing's cursor).

use super::html::{esc, phase_badge, push_esc, query, url_part};
use super::run_parts::{self, Part};
use baton_store::RunMetadata;
use baton_store::time::{parse_rfc3339, short_age};
use std::fmt::Write as _;
use std::path::Path;

/// One row: the run, where its project is, whether it was left interrupted, and the epic
/// story or session step it was made for.
pub struct Row<'a> {
    pub run: &'a RunMetadata,
    pub project_root: &'a Path,
    pub interrupted: bool,
    pub part: Option<Part>,
}

/// The filters of the form, as given (empty = any).
#[derive(Debug, Default, Clone)]
pub struct Filters {
    pub project: String,
    pub phase: String,
    pub workflow: String,
    /// `epic`, `session` or `single` (see [`run_parts::KINDS`]).
    pub part: String,
    /// A story key or a session id.
    pub group: String,
}

impl Filters {
    fn is_empty(&self) -> bool {
        self.project.is_empty()
            && self.phase.is_empty()
            && self.workflow.is_empty()
            && self.part.is_empty()
            && self.group.is_empty()
    }

    fn pairs(&self) -> [(&'static str, &str); 5] {
        [
            ("project", self.project.as_str()),
            ("phase", self.phase.as_str()),
            ("workflow", self.workflow.as_str()),
            ("part", self.part.as_str()),
            ("group", self.group.as_str()),
        ]
    }
}

pub struct View<'a> {
    pub rows: Vec<Row<'a>>,
    pub filters: &'a Filters,
    /// The cursor of the next (older) page, when there is one.
    pub next_cursor: Option<&'a str>,
    /// Whether this page was reached with a cursor (then a link back to the newest).
    pub paged: bool,
    /// Known project roots, offered in the project filter.
    pub projects: &'a [String],
    /// Problems the listing reported (a damaged index, …), shown above the table.
    pub warnings: &'a [String],
    pub now_secs: u64,
}

const PHASES: [&str; 6] = [
    "idle",
    "running",
    "waiting-user",
    "completed",
    "failed",
    "interrupted",
];

fn filter_form(out: &mut String, view: &View) {
    let f = view.filters;
    out.push_str(
        "<form id=\"runs-filter\" class=\"filters\" method=\"get\" action=\"/\" role=\"search\">\
         <div class=\"field\"><label for=\"filter-project\">Project</label>\
         <input id=\"filter-project\" name=\"project\" list=\"known-projects\" placeholder=\"any\" value=\"",
    );
    push_esc(out, &f.project);
    out.push_str("\"><datalist id=\"known-projects\">");
    for p in view.projects {
        out.push_str("<option value=\"");
        push_esc(out, p);
        out.push_str("\"></option>");
    }
    out.push_str(
        "</datalist></div><div class=\"field\"><label for=\"filter-phase\">Phase</label>\
         <select id=\"filter-phase\" name=\"phase\"><option value=\"\">any</option>",
    );
    for p in PHASES {
        let selected = if f.phase == p { " selected" } else { "" };
        let _ = write!(out, "<option value=\"{p}\"{selected}>{p}</option>");
    }
    out.push_str(
        "</select></div><div class=\"field\"><label for=\"filter-workflow\">Workflow</label>\
         <input id=\"filter-workflow\" name=\"workflow\" placeholder=\"any\" value=\"",
    );
    push_esc(out, &f.workflow);
    out.push_str(
        "\"></div><div class=\"field\"><label for=\"filter-part\">Part of</label><select id=\"filter-part\" name=\"part\">",
    );
    for (value, label) in run_parts::KINDS {
        let selected = if f.part == value { " selected" } else { "" };
        let _ = write!(out, "<option value=\"{value}\"{selected}>{label}</option>");
    }
    out.push_str(
        "</select></div><div class=\"field\"><label for=\"filter-group\">Story or session</label>\
         <input id=\"filter-group\" name=\"group\" placeholder=\"any\" value=\"",
    );
    push_esc(out, &f.group);
    out.push_str(
        "\"></div><div class=\"field\"><button type=\"submit\" id=\"filter-apply\">Filter</button></div></form>",
    );
}

pub fn render(view: &View) -> String {
    let mut out = String::with_capacity(4096 + view.rows.len() * 600);
    out.push_str("<div class=\"heading\"><h1>Runs</h1><a class=\"button primary\" id=\"start-link\" href=\"/start\">Start a run</a></div>");
    filter_form(&mut out, view);
    // The newest page follows new runs and phase changes (app.js reloads this block); an
    // older page stays still.
    out.push_str("<div id=\"runs-list\" data-live");
    if !view.paged {
        out.push_str(" data-poll=\"5000\"");
    }
    out.push('>');
    for w in view.warnings {
        out.push_str("<p class=\"warning\" role=\"alert\">");
        push_esc(&mut out, w);
        out.push_str("</p>");
    }
    if view.rows.is_empty() {
        out.push_str("<p id=\"runs-empty\" class=\"empty\">No runs");
        if view.filters.is_empty() {
            out.push_str(" yet. <a href=\"/start\">Start one</a>.");
        } else {
            out.push_str(" match these filters.");
        }
        out.push_str("</p>");
    } else {
        out.push_str(
            "<div class=\"table-wrap\"><table id=\"runs-table\" data-testid=\"runs-table\"><thead><tr>\
             <th scope=\"col\">Run</th><th scope=\"col\">Phase</th><th scope=\"col\">Workflow</th>\
             <th scope=\"col\">Node</th><th scope=\"col\">Agent</th><th scope=\"col\">Created</th>\
             <th scope=\"col\">Project</th></tr></thead>",
        );
        for entry in grouped(&view.rows) {
            match entry {
                Entry::Single(row) => {
                    out.push_str("<tbody>");
                    run_row(&mut out, row, view.now_secs);
                    out.push_str("</tbody>");
                }
                Entry::Group { key, rows } => group(&mut out, &key, &rows, view.now_secs),
            }
        }
        out.push_str("</table></div>");
    }
    let pairs = view.filters.pairs();
    let base: Vec<(&str, &str)> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .copied()
        .collect();
    out.push_str("<nav class=\"pager\" aria-label=\"Pages\">");
    if view.paged {
        let _ = write!(
            out,
            "<a id=\"page-newest\" href=\"/{}\">← Newest</a>",
            esc(&query(&base))
        );
    }
    if let Some(cursor) = view.next_cursor {
        let mut pairs = base.clone();
        pairs.push(("cursor", cursor));
        let _ = write!(
            out,
            "<a id=\"page-older\" data-testid=\"page-older\" href=\"/{}\">Older runs →</a>",
            esc(&query(&pairs))
        );
    }
    out.push_str("</nav></div>");
    out
}

/// The rows of a page in order, the runs of one epic story or session step gathered under
/// it (where its newest run is; newest first inside).
enum Entry<'v, 'a> {
    Single(&'v Row<'a>),
    Group { key: String, rows: Vec<&'v Row<'a>> },
}

fn grouped<'v, 'a>(rows: &'v [Row<'a>]) -> Vec<Entry<'v, 'a>> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for row in rows {
        let Some(part) = &row.part else {
            entries.push(Entry::Single(row));
            continue;
        };
        let key = part.group_key(row.project_root);
        match at.get(&key).and_then(|&i| entries.get_mut(i)) {
            Some(Entry::Group { rows, .. }) => rows.push(row),
            _ => {
                at.insert(key.clone(), entries.len());
                entries.push(Entry::Group {
                    key,
                    rows: vec![row],
                });
            }
        }
    }
    entries
}

/// A group: a heading row naming the story or step (with a link to its board or session, and
/// one that filters the list on it), then its runs.
fn group(out: &mut String, key: &str, rows: &[&Row], now_secs: u64) {
    let Some(first) = rows.first() else { return };
    let Some(part) = &first.part else { return };
    let root = first.project_root.display().to_string();
    out.push_str("<tbody class=\"group\" data-group=\"");
    push_esc(out, key);
    let _ = write!(
        out,
        "\" data-part=\"{}\"><tr class=\"group-head\"><th colspan=\"7\" scope=\"rowgroup\">",
        part.kind()
    );
    let runs = if rows.len() == 1 { "run" } else { "runs" };
    match part {
        Part::Story { story, .. } => {
            out.push_str("Epic story <a href=\"");
            push_esc(out, &format!("/epic{}", query(&[("project", &root)])));
            out.push_str("\" class=\"mono\">");
            push_esc(out, story);
            let _ = write!(
                out,
                "</a> <span class=\"muted\">{} phase {runs}</span>",
                rows.len()
            );
        }
        Part::Step {
            session,
            index,
            skill,
        } => {
            out.push_str("Session <a href=\"");
            push_esc(
                out,
                &format!(
                    "/sessions/{}{}",
                    url_part(session),
                    query(&[("project", &root)])
                ),
            );
            out.push_str("\" class=\"mono\">");
            push_esc(out, session);
            let _ = write!(out, "</a> step {index} (");
            push_esc(out, skill);
            let _ = write!(
                out,
                ") <span class=\"muted\">{} task {runs}</span>",
                rows.len()
            );
        }
    }
    out.push_str(" <a class=\"only\" href=\"/");
    push_esc(out, &query(&[("group", part.name())]));
    out.push_str("\">only these</a></th></tr>");
    for row in rows {
        run_row(out, row, now_secs);
    }
    out.push_str("</tbody>");
}

fn run_row(out: &mut String, row: &Row, now_secs: u64) {
    let r = row.run;
    let phase = if row.interrupted {
        "interrupted"
    } else {
        r.phase.as_str()
    };
    out.push_str("<tr data-run-id=\"");
    push_esc(out, &r.run_id);
    out.push_str("\"><td><a class=\"mono\" href=\"/runs/");
    out.push_str(&esc(&url_part(&r.run_id)));
    out.push_str("\">");
    push_esc(out, r.run_id.get(..13).unwrap_or(&r.run_id));
    out.push_str("</a>");
    if r.kind == baton_store::RunKind::Task {
        out.push_str(" <span class=\"tag\">task</span>");
    }
    if let Some(Part::Story { phase, n, .. }) = &row.part {
        out.push_str(" <span class=\"tag\">");
        push_esc(out, phase);
        let _ = write!(out, " #{n}</span>");
    }
    out.push_str("</td><td>");
    phase_badge(out, phase);
    out.push_str("</td><td>");
    push_esc(out, &r.workflow_ref);
    out.push_str("</td><td>");
    push_esc(out, r.current_node_id.as_deref().unwrap_or("—"));
    out.push_str("</td><td>");
    push_esc(out, &r.active_agent_id);
    out.push_str("</td><td><time datetime=\"");
    push_esc(out, &r.created_at);
    out.push_str("\" title=\"");
    push_esc(out, &r.created_at);
    out.push_str("\">");
    let age = parse_rfc3339(&r.created_at)
        .map(|t| format!("{} ago", short_age(now_secs.saturating_sub(t))))
        .unwrap_or_else(|| r.created_at.clone());
    push_esc(out, &age);
    out.push_str("</time></td><td class=\"path\">");
    push_esc(out, &row.project_root.display().to_string());
    out.push_str("</td></tr>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_store::Phase;

    fn run(id: &str, workflow: &str, phase: Phase) -> RunMetadata {
        serde_json::from_value(serde_json::json!({
            "runId": id, "projectId": "p", "packageId": "pkg", "packageSha256": "00",
            "workflowRef": workflow, "activeAgentId": "a<gent>", "phase": phase.as_str(),
            "createdAt": "2026-11-22T10:00:00Z", "lastUpdatedAt": "2026-11-22T10:00:00Z",
        }))
        .unwrap()
    }

    #[test]
    fn rows_link_to_runs_and_hostile_names_are_escaped() {
        let a = run(
            "0196aaaa-bbbb-7ccc",
            "<script>alert('w')</script>",
            Phase::Running,
        );
        let b = run("id/../x?y", "wf", Phase::Completed);
        let filters = Filters {
            project: "\"><script>".into(),
            phase: "completed".into(),
            workflow: String::new(),
            part: String::new(),
            group: String::new(),
        };
        let root = Path::new("/home/<me>/proj");
        let view = View {
            rows: vec![
                Row {
                    run: &a,
                    project_root: root,
                    interrupted: true,
                    part: None,
                },
                Row {
                    run: &b,
                    project_root: root,
                    interrupted: false,
                    part: None,
                },
            ],
            filters: &filters,
            next_cursor: Some("c&1"),
            paged: false,
            projects: &[],
            warnings: &[],
            now_secs: parse_rfc3339("2026-11-22T10:05:00Z").unwrap(),
        };
        let html = render(&view);
        assert!(!html.contains("<script"));
        assert!(html.contains("&lt;script&gt;alert(&#39;w&#39;)&lt;/script&gt;"));
        assert!(html.contains("href=\"/runs/id%2F..%2Fx%3Fy\""));
        assert!(html.contains("phase-interrupted\">interrupted<"));
        assert!(html.contains("value=\"&quot;&gt;&lt;script&gt;\""));
        assert!(html.contains("<option value=\"completed\" selected>"));
        assert!(html.contains("5m ago") || html.contains("ago"));
        assert!(html.contains("/home/&lt;me&gt;/proj"));
        assert!(html.contains(
            "href=\"/?project=%22%3E%3Cscript%3E&amp;phase=completed&amp;cursor=c%261\""
        ));
        assert!(!html.contains("page-newest"));
        assert!(html.contains("<div id=\"runs-list\" data-live data-poll=\"5000\">"));
    }

    #[test]
    fn runs_of_one_story_or_step_sit_under_it_in_page_order() {
        let a = run("r-a", "dev-story", Phase::Completed);
        let b = run("r-b", "wf", Phase::Completed);
        let c = run("r-c", "create-story", Phase::Completed);
        let mut t = run("r-t", "S-1/step-2-plan", Phase::Failed);
        t.kind = baton_store::RunKind::Task;
        let story = |phase: &str| {
            Some(Part::Story {
                story: "1-2-<x>".into(),
                phase: phase.into(),
                n: 1,
            })
        };
        let root = Path::new("/p");
        let row = |run, part| Row {
            run,
            project_root: root,
            interrupted: false,
            part,
        };
        let filters = Filters::default();
        let view = View {
            rows: vec![
                row(&a, story("dev")),
                row(&b, None),
                row(
                    &t,
                    Some(Part::Step {
                        session: "S-1".into(),
                        index: 2,
                        skill: "plan".into(),
                    }),
                ),
                row(&c, story("create-story")),
            ],
            filters: &filters,
            next_cursor: None,
            paged: false,
            projects: &[],
            warnings: &[],
            now_secs: 0,
        };
        let html = render(&view);
        let at = |s: &str| html.find(s).unwrap();
        // The story's group where its newest run is, holding both its runs.
        assert!(at("data-group=\"story:/p:1-2-&lt;x&gt;\"") < at("data-run-id=\"r-a\""));
        assert!(at("data-run-id=\"r-a\"") < at("data-run-id=\"r-c\""));
        assert!(at("data-run-id=\"r-c\"") < at("data-run-id=\"r-b\""));
        assert!(at("data-run-id=\"r-b\"") < at("data-group=\"step:/p:S-1:2\""));
        assert!(html.contains("2 phase runs"));
        assert!(html.contains("href=\"/epic?project=%2Fp\""));
        assert!(html.contains("href=\"/sessions/S-1?project=%2Fp\""));
        assert!(html.contains("step 2 (plan)"));
        assert!(html.contains("href=\"/?group=1-2-%3Cx%3E\">only these"));
        assert!(html.contains("<option value=\"session\">session steps</option>"));
    }

    #[test]
    fn an_empty_listing_says_so() {
        let filters = Filters::default();
        let view = View {
            rows: vec![],
            filters: &filters,
            next_cursor: None,
            paged: true,
            projects: &["/p".to_string()],
            warnings: &["index <damaged>".to_string()],
            now_secs: 0,
        };
        let html = render(&view);
        assert!(html.contains("id=\"runs-empty\""));
        assert!(html.contains("id=\"page-newest\" href=\"/\""));
        assert!(html.contains("index &lt;damaged&gt;"));
        assert!(!html.contains("page-older"));
        assert!(html.contains("<div id=\"runs-list\" data-live>"));
    }
}
