//! The epic board: `baton epic status` ([`Board`]) as columns of the sprint-status values, the
//! phase in flight and review cycle per story, and each pending question with a form that
//! answers it in place (`POST /api/epic/answer`). A parallel epic's stories in flight are shown
//! side by side above the columns, with their phase and worktree branch, and why the others
//! wait.

use super::html::{esc, phase_badge, push_esc, push_esc_code, url_part};
use baton_bmad::keys::STORY_STATUSES;
use baton_epic::board::{Board, StoryRow};
use baton_epic::findings::Findings;
use baton_epic::parallel_board::ParallelBoard;
use std::fmt::Write as _;

/// The project picker shown above a board (or alone, when no project is chosen yet).
pub fn project_form(out: &mut String, action: &str, project: &str, projects: &[String]) {
    let _ = write!(
        out,
        "<form id=\"project-form\" class=\"filters\" method=\"get\" action=\"{action}\">\
         <div class=\"field\"><label for=\"project-input\">Project</label>\
         <input id=\"project-input\" name=\"project\" list=\"known-projects\" required value=\""
    );
    push_esc(out, project);
    out.push_str("\"><datalist id=\"known-projects\">");
    for p in projects {
        out.push_str("<option value=\"");
        push_esc(out, p);
        out.push_str("\"></option>");
    }
    out.push_str("</datalist></div><div class=\"field\"><button type=\"submit\" id=\"project-open\">Open</button></div></form>");
}

/// Why a project has no board. A project without a sprint status is no failure: it says what
/// makes one, without an alarm; any other error is shown as one, with its hint.
pub fn no_board(e: &baton_epic::EpicError) -> String {
    let mut out = String::new();
    let calm = e.code == "SPRINT_STATUS_MISSING";
    if calm {
        out.push_str("<section class=\"card\" id=\"epic-no-sprint\" data-code=\"");
        push_esc(&mut out, e.code);
        out.push_str("\"><h2>No epic board here yet</h2><p>");
    } else {
        out.push_str("<section class=\"card error\" id=\"epic-error\" role=\"alert\"><p><code>");
        push_esc(&mut out, e.code);
        out.push_str("</code> ");
    }
    push_esc(&mut out, &e.message);
    out.push_str("</p>");
    if let Some(hint) = &e.hint {
        out.push_str("<p class=\"muted\" id=\"epic-hint\">");
        push_esc(&mut out, hint);
        out.push_str("</p>");
    }
    if calm {
        out.push_str(
            "<p class=\"muted\"><code>baton demo epic</code> makes a sample project with a board.</p>",
        );
    }
    out.push_str("</section>");
    out
}

/// The board of `project` (the path as the person typed it, sent back with answers).
pub fn render(board: &Board, project: &str) -> String {
    let mut out = String::with_capacity(8192);
    // While an orchestrator drives the project, app.js reloads the board every few seconds
    // (keeping an answer being typed).
    out.push_str("<div id=\"epic-board\" data-live");
    if board.live {
        out.push_str(" data-poll=\"3000\"");
    }
    out.push_str("><section id=\"epic-summary\" class=\"card\"><dl class=\"facts\">");
    fact(&mut out, "Epic", board.epic_id.as_deref().unwrap_or("—"));
    // Where the autopilot stands, not the seed file's `status` (`paused` after a done epic).
    let standing = board.standing.as_str();
    let _ = write!(
        out,
        "<dt>Autopilot</dt><dd id=\"epic-standing\" data-standing=\"{standing}\">"
    );
    phase_badge(&mut out, standing);
    out.push_str("</dd>");
    let current = board.current_story.as_deref().unwrap_or("—");
    fact(&mut out, "Current story", current);
    let last = board.last_story_completed.as_deref().unwrap_or("—");
    fact(&mut out, "Last completed", last);
    fact(&mut out, "Artifacts", &board.implementation_artifacts);
    out.push_str("</dl>");
    if let Some(f) = &board.last_failure {
        out.push_str("<p class=\"error\" id=\"epic-failure\" role=\"alert\">");
        let _ = write!(
            out,
            "{} failed in {}: <code>{}</code> {}",
            esc(&f.story_key),
            esc(f.phase.as_str()),
            esc(&f.code),
            esc(&f.message)
        );
        out.push_str("</p>");
    }
    // What to do next, in the words `baton epic run` ends with.
    if let Some(next) = baton_epic::next_step::of_board(board, std::path::Path::new(project)) {
        out.push_str("<p class=\"next\" id=\"epic-next\" data-testid=\"epic-next\">Next: ");
        push_esc_code(&mut out, &next);
        out.push_str("</p>");
    }
    out.push_str("</section>");
    if let Some(p) = &board.pipeline {
        pipeline(&mut out, p);
    }
    if let Some(p) = &board.parallel {
        parallel(&mut out, p);
    }
    if board.epics.is_empty() {
        out.push_str("<p class=\"empty\" id=\"epic-empty\">The sprint status lists no epic.</p>");
    }
    for (e, epic) in board.epics.iter().enumerate() {
        let _ = write!(
            out,
            "<section class=\"epic\" aria-labelledby=\"epic-{e}-title\"><div class=\"heading\"><h2 id=\"epic-{e}-title\">"
        );
        push_esc(&mut out, &epic.key);
        out.push_str("</h2>");
        phase_badge(&mut out, &epic.status);
        if let Some(u) = &epic.usage {
            let _ = write!(
                out,
                " <span class=\"muted\" data-testid=\"epic-usage\">{}</span>",
                usage_text(u)
            );
        }
        let _ = write!(
            out,
            "</div><div class=\"board\" id=\"board-{e}\" data-testid=\"board-{e}\">"
        );
        let known = |s: &StoryRow| STORY_STATUSES.contains(&normalized(&s.status));
        for status in STORY_STATUSES {
            let stories: Vec<&StoryRow> = epic
                .stories
                .iter()
                .filter(|s| normalized(&s.status) == status)
                .collect();
            column(&mut out, status, &stories, board, project);
        }
        let other: Vec<&StoryRow> = epic.stories.iter().filter(|s| !known(s)).collect();
        if !other.is_empty() {
            column(&mut out, "other", &other, board, project);
        }
        out.push_str("</div></section>");
    }
    findings(&mut out, &board.findings);
    out.push_str("</div>");
    out
}

/// The pipeline: each phase in order with what runs it, and why this pipeline.
fn pipeline(out: &mut String, p: &baton_epic::pipeline::PipelineView) {
    out.push_str(
        "<section class=\"card\" id=\"epic-pipeline\" aria-labelledby=\"epic-pipeline-title\"><div class=\"heading\"><h2 id=\"epic-pipeline-title\">Pipeline</h2>",
    );
    let _ = write!(
        out,
        " <span class=\"tag\" data-testid=\"pipeline-source\">{}</span></div><ol class=\"pipeline\" data-testid=\"epic-pipeline\">",
        esc(p.source.as_str())
    );
    for ph in &p.phases {
        let _ = write!(out, "<li data-phase=\"{}\"><strong>", esc(ph.name));
        push_esc(out, ph.name);
        out.push_str("</strong> ");
        push_esc(out, &ph.runs.name);
        let _ = write!(out, " <span class=\"muted\">({}, <code>", esc(ph.runs.kind));
        push_esc(out, &ph.runs.path);
        out.push_str("</code>)</span></li>");
    }
    out.push_str("</ol><p class=\"muted\" data-testid=\"pipeline-reason\">");
    push_esc(out, &p.reason);
    out.push_str("</p></section>");
}

/// `[autopilot.publish]`: the story's branch, how far publishing got, the link its command
/// printed (an http(s) URL only), its last error.
fn story_publish(out: &mut String, p: &baton_epic::publish::Story) {
    out.push_str("<p class=\"publish\" data-testid=\"story-publish\" data-state=\"");
    out.push_str(p.state.as_str());
    out.push_str("\"><span class=\"mono\">");
    push_esc(out, &p.branch);
    out.push_str("</span> <span class=\"tag\">");
    out.push_str(p.state.as_str());
    if p.holds() {
        out.push_str(", waits for its merge");
    }
    out.push_str("</span>");
    if let Some(url) = p
        .url
        .as_ref()
        .filter(|u| u.starts_with("https://") || u.starts_with("http://"))
    {
        out.push_str(" <a href=\"");
        push_esc(out, url);
        out.push_str("\" rel=\"noopener noreferrer\">");
        push_esc(out, url);
        out.push_str("</a>");
    }
    out.push_str("</p>");
    if let Some(e) = &p.error {
        out.push_str("<p class=\"warning\">publish: ");
        push_esc(out, &format!("{}: {}", e.code, e.message));
        if let Some(h) = &e.hint {
            out.push_str("<br><small>hint: ");
            push_esc(out, h);
            out.push_str("</small>");
        }
        out.push_str("</p>");
    }
}

/// A parallel epic: the stories in flight side by side (phase, state, worktree branch and
/// folder), the stories that start next, and why each other story waits.
fn parallel(out: &mut String, p: &ParallelBoard) {
    out.push_str(
        "<section class=\"card\" id=\"epic-parallel\" aria-labelledby=\"epic-parallel-title\"><div class=\"heading\"><h2 id=\"epic-parallel-title\">Stories in flight</h2>",
    );
    let _ = write!(
        out,
        " <span class=\"muted\" data-testid=\"parallel-slots\">up to {} at once",
        p.slots
    );
    if let Some(b) = &p.branch {
        out.push_str(", merged onto <code>");
        push_esc(out, b);
        out.push_str("</code>");
    }
    out.push_str(", worktrees in <code>");
    push_esc(out, &p.worktrees);
    out.push_str("</code></span></div>");
    if p.in_flight.is_empty() {
        out.push_str("<p class=\"empty\" id=\"epic-no-flight\">No story in flight.</p>");
    } else {
        out.push_str(
            "<div class=\"board flights\" id=\"epic-flights\" data-testid=\"epic-flights\">",
        );
        for f in &p.in_flight {
            out.push_str("<article class=\"story flight\" data-flight=\"");
            push_esc(out, &f.key);
            let _ = write!(
                out,
                "\" data-state=\"{}\"><div class=\"key\">",
                f.state.as_str()
            );
            push_esc(out, &f.key);
            out.push_str("</div><div class=\"meta\">");
            if let Some(ph) = &f.phase {
                phase_badge(out, ph);
            }
            phase_badge(out, f.state.as_str());
            if let Some(c) = f.review_cycle.filter(|c| *c > 1) {
                let _ = write!(out, "<span class=\"tag\">review cycle {c}</span>");
            }
            if let Some(id) = &f.run_id {
                out.push_str("<a class=\"mono\" href=\"/runs/");
                out.push_str(&esc(&url_part(id)));
                out.push_str("\">run ");
                push_esc(out, id.get(..13).unwrap_or(id));
                out.push_str("</a>");
            }
            out.push_str(
                "</div><dl class=\"facts\"><dt>Branch</dt><dd><code data-testid=\"flight-branch\">",
            );
            push_esc(out, &f.branch);
            out.push_str("</code></dd><dt>Worktree</dt><dd><code>");
            push_esc(out, &f.worktree);
            out.push_str("</code></dd></dl>");
            if let Some(n) = &f.note {
                out.push_str("<p class=\"muted\"><small>");
                push_esc(out, n);
                out.push_str("</small></p>");
            }
            out.push_str("</article>");
        }
        out.push_str("</div>");
    }
    if !p.start.is_empty() {
        out.push_str("<p id=\"epic-start-next\">Start next: ");
        for (i, k) in p.start.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str("<code>");
            push_esc(out, k);
            out.push_str("</code>");
        }
        out.push_str("</p>");
    }
    if !p.waiting.is_empty() {
        out.push_str("<h3>Waiting</h3><ul id=\"epic-waiting\">");
        for w in &p.waiting {
            out.push_str("<li data-key=\"");
            push_esc(out, &w.key);
            let _ = write!(out, "\" data-why=\"{}\"><code>", w.why);
            push_esc(out, &w.key);
            out.push_str("</code> ");
            push_esc(out, &w.reason);
            out.push_str("</li>");
        }
        out.push_str("</ul>");
    }
    out.push_str("</section>");
}

/// What the columns cannot show, each key with its line: values BMAD does not define (with the
/// reason), keys outside BMAD's grammar, legacy values and retrospective action items.
fn findings(out: &mut String, f: &Findings) {
    for w in &f.warnings {
        out.push_str("<p class=\"error\" id=\"epic-warning\" role=\"alert\">");
        push_esc(out, w);
        out.push_str("</p>");
    }
    let mut list = |id: &str, title: &str, rows: Vec<(usize, &str, &str, String)>| {
        if rows.is_empty() {
            return;
        }
        let _ = write!(
            out,
            "<section class=\"card\" id=\"{id}\"><h2>{title}</h2><ul>"
        );
        for (line, key, status, note) in rows {
            let _ = write!(out, "<li data-key=\"{}\">line {line}: <code>", esc(key));
            push_esc(out, key);
            out.push_str(": ");
            push_esc(out, status);
            out.push_str("</code>");
            if !note.is_empty() {
                out.push(' ');
                push_esc(out, &note);
            }
            out.push_str("</li>");
        }
        out.push_str("</ul></section>");
    };
    list(
        "epic-not-runnable",
        "Not run: values BMAD does not define",
        f.not_runnable
            .iter()
            .map(|n| (n.line, n.key.as_str(), n.status.as_str(), n.reason.clone()))
            .collect(),
    );
    list(
        "epic-unrecognized",
        "Outside BMAD's key grammar, never run",
        f.unrecognized
            .iter()
            .map(|u| (u.line, u.key.as_str(), u.status.as_str(), String::new()))
            .collect(),
    );
    list(
        "epic-legacy",
        "Legacy values, read as their modern names",
        f.legacy_mapped
            .iter()
            .map(|m| {
                let note = format!("(read as {})", m.mapped_to);
                (m.line, m.key.as_str(), m.status.as_str(), note)
            })
            .collect(),
    );
    list(
        "epic-retro-items",
        "Retrospective action items (bmad-loop), not run",
        f.retro_items
            .iter()
            .map(|i| (i.line, i.key.as_str(), i.status.as_str(), String::new()))
            .collect(),
    );
}

fn fact(out: &mut String, label: &str, value: &str) {
    out.push_str("<dt>");
    out.push_str(label);
    out.push_str("</dt><dd>");
    push_esc(out, value);
    out.push_str("</dd>");
}

/// BMAD's legacy story value (`drafted`) in the column it stands for.
fn normalized(status: &str) -> &str {
    if status == "drafted" {
        "ready-for-dev"
    } else {
        status
    }
}

fn column(out: &mut String, status: &str, stories: &[&StoryRow], board: &Board, project: &str) {
    let _ = write!(
        out,
        "<div class=\"column\" data-status=\"{status}\"><h3><span>{status}</span><span>{}</span></h3>",
        stories.len()
    );
    for s in stories {
        let current = board.current_story.as_deref() == Some(s.key.as_str());
        out.push_str("<article class=\"story");
        if current {
            out.push_str(" current");
        }
        out.push_str("\" data-story=\"");
        push_esc(out, &s.key);
        out.push_str("\"><div class=\"key\">");
        push_esc(out, &s.key);
        out.push_str("</div>");
        if status == "other" {
            out.push_str("<small>");
            push_esc(out, &s.status);
            out.push_str("</small>");
        }
        out.push_str("<div class=\"meta\">");
        if let Some(p) = &s.phase {
            phase_badge(out, p);
        }
        // Past the first review only, as `baton epic status` says it: a story that never
        // reached review has no cycle to show.
        if let Some(c) = s.review_cycle.filter(|c| *c > 1) {
            let _ = write!(out, "<span class=\"tag\">review cycle {c}</span>");
        }
        if let Some(r) = &s.review {
            phase_badge(out, r);
        }
        // The run in flight, when the progress record does not list it yet.
        if let Some(id) = s
            .run_id
            .as_ref()
            .filter(|id| !s.runs.iter().any(|r| &r.run_id == *id))
        {
            out.push_str("<a class=\"mono\" href=\"/runs/");
            out.push_str(&esc(&url_part(id)));
            out.push_str("\">run ");
            push_esc(out, id.get(..13).unwrap_or(id));
            out.push_str("</a>");
        }
        out.push_str("</div>");
        story_runs(out, s);
        if let Some(u) = &s.usage {
            let _ = write!(
                out,
                "<p class=\"muted\" data-testid=\"story-usage\"><small>{}</small></p>",
                usage_text(u)
            );
        }
        if let Some(p) = &s.problem {
            out.push_str("<p class=\"warning\">");
            push_esc(out, p);
            out.push_str("</p>");
        }
        if let Some(p) = &s.publish {
            story_publish(out, p);
        }
        for q in &s.questions {
            let form_id = format!("answer-{}-{}", url_part(&s.key), url_part(&q.id));
            out.push_str("<form class=\"epic-answer\" id=\"");
            push_esc(out, &form_id);
            out.push_str("\" data-testid=\"");
            push_esc(out, &form_id);
            out.push_str("\" data-action=\"/api/epic/answer\" data-project=\"");
            push_esc(out, project);
            out.push_str("\" data-story=\"");
            push_esc(out, &s.key);
            out.push_str("\" data-question=\"");
            push_esc(out, &q.id);
            out.push_str("\"><p class=\"q\">");
            push_esc(out, &q.question);
            out.push_str("</p>");
            if let Some(c) = &q.context {
                out.push_str("<small>");
                push_esc(out, c);
                out.push_str("</small>");
            }
            out.push_str("<label for=\"");
            push_esc(out, &form_id);
            out.push_str("-text\">Answer</label><textarea id=\"");
            push_esc(out, &form_id);
            out.push_str("-text\" rows=\"2\" required></textarea><div class=\"actions\"><button type=\"submit\" class=\"primary\">Answer</button></div><p class=\"status\" role=\"status\" aria-live=\"polite\"></p></form>");
        }
        out.push_str("</article>");
    }
    out.push_str("</div>");
}

/// `12,345 tokens, 71% of the prompt cached, $0.0123` (the cost only where priced; `cached,
/// 2100 written to cache,` where the provider wrote to its cache).
fn usage_text(u: &baton_llm::Usage) -> String {
    let mut t = format!(
        "{} tokens, {:.0}% of the prompt cached",
        u.total_tokens,
        u.cached_share() * 100.0
    );
    if u.cache_write_tokens > 0 {
        let _ = write!(t, ", {} written to cache", u.cache_write_tokens);
    }
    if let Some(c) = u.cost_usd {
        let _ = write!(t, ", ${c:.4}");
    }
    t
}

/// Links to the story's phase runs, oldest first: `create-story #1`, `dev #2 (cycle 2)`, ….
fn story_runs(out: &mut String, s: &StoryRow) {
    if s.runs.is_empty() {
        return;
    }
    out.push_str("<ol class=\"story-runs\" aria-label=\"Phase runs\">");
    for r in &s.runs {
        out.push_str("<li><a data-testid=\"story-run\" data-phase=\"");
        push_esc(out, &r.phase);
        out.push_str("\" data-run-id=\"");
        push_esc(out, &r.run_id);
        out.push_str("\" href=\"/runs/");
        out.push_str(&esc(&url_part(&r.run_id)));
        out.push_str("\" title=\"run ");
        push_esc(out, &r.run_id);
        out.push_str("\">");
        push_esc(out, &r.phase);
        let _ = write!(out, " #{}", r.n);
        if r.review_cycle > 1 {
            let _ = write!(out, " (cycle {})", r.review_cycle);
        }
        out.push_str("</a>");
        if !r.result.is_empty() {
            out.push(' ');
            phase_badge(out, &r.result);
        }
        out.push_str("</li>");
    }
    out.push_str("</ol>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_epic::board::{EpicRow, PendingQuestion, Standing};

    fn board() -> Board {
        let mut current = StoryRow::new("1-2-<b>login</b>", "in-progress");
        current.phase = Some("dev".into());
        current.review_cycle = Some(2);
        current.run_id = Some("0196abcd-ef01-7000".into());
        current.runs = vec![baton_epic::board::PhaseRunLink {
            phase: "create-story".into(),
            n: 1,
            run_id: "0196aaaa-<1>".into(),
            review_cycle: 1,
            result: "completed".into(),
            usage: None,
        }];
        current.questions = vec![PendingQuestion {
            id: "q1".into(),
            question: "Use \"OAuth\"? <script>".into(),
            context: None,
        }];
        let mut odd = StoryRow::new("1-3-x", "blocked");
        odd.review = Some("changes-requested".into());
        Board {
            implementation_artifacts: "_bmad-output/implementation-artifacts".into(),
            epic_id: Some("epic-1".into()),
            state: Some("running".into()),
            standing: Standing::Running,
            live: true,
            current_story: Some("1-2-<b>login</b>".into()),
            last_story_completed: None,
            last_failure: None,
            sprint_status: Default::default(),
            story_files: Default::default(),
            parallel: None,
            pipeline: None,
            epics: vec![EpicRow {
                key: "epic-1".into(),
                status: "in-progress".into(),
                stories: vec![
                    StoryRow::new("1-1-setup", "done"),
                    current,
                    odd,
                    StoryRow::new("1-4-y", "drafted"),
                ],
                usage: None,
            }],
            findings: Findings {
                unrecognized: vec![baton_epic::findings::Unrecognized {
                    key: "epic-3a<i>".into(),
                    status: "in-progress".into(),
                    line: 12,
                }],
                not_runnable: vec![baton_epic::findings::NotRunnable {
                    key: "1-3-x".into(),
                    status: "blocked".into(),
                    reason: "a mark that the work waits on something".into(),
                    kind: "story",
                    line: 7,
                }],
                ..Findings::default()
            },
        }
    }

    #[test]
    fn the_tokens_of_stories_and_epics_are_shown_with_the_cache_share_and_cost() {
        let mut b = board();
        let u = baton_llm::Usage {
            prompt_tokens: 1_000,
            cached_prompt_tokens: 750,
            completion_tokens: 200,
            total_tokens: 1_200,
            cost_usd: Some(0.0021),
            ..Default::default()
        };
        b.epics[0].usage = Some(u);
        b.epics[0].stories[1].usage = Some(u);
        let html = render(&b, "/p");
        assert!(html.contains(
            "<span class=\"muted\" data-testid=\"epic-usage\">1200 tokens, 75% of the prompt cached, $0.0021</span>"
        ));
        assert_eq!(html.matches("data-testid=\"story-usage\"").count(), 1);
        assert!(!render(&board(), "/p").contains("usage"));
        assert!(!html.contains("written to cache"));
        b.epics[0].usage = Some(baton_llm::Usage {
            cache_write_tokens: 150,
            ..u
        });
        assert!(render(&b, "/p").contains(
            "data-testid=\"epic-usage\">1200 tokens, 75% of the prompt cached, 150 written to cache, $0.0021</span>"
        ));
    }

    #[test]
    fn the_pipeline_is_shown_in_order_with_what_runs_each_phase_and_why() {
        use baton_epic::pipeline::{PhaseView, PipelineView, Runs};
        let phase = |name, kind, runs: &str, path: &str| PhaseView {
            name,
            runs: Runs {
                kind,
                name: runs.into(),
                path: path.into(),
            },
            render: None,
            leaves: "",
            back_to: None,
            action: None,
            settings: Vec::new(),
        };
        let mut b = board();
        assert!(!render(&b, "/p").contains("epic-pipeline"));
        b.pipeline = Some(PipelineView {
            source: baton_bmad::pipeline::Source::Bmad611,
            reason: "`bmad-build-auto` is installed <here>".into(),
            phases: vec![
                phase(
                    "build",
                    "skill",
                    "bmad-build-auto",
                    ".claude/skills/bmad-build-auto",
                ),
                phase(
                    "code-review",
                    "package",
                    "code-review",
                    "bmad-phase4 (bundled)",
                ),
            ],
        });
        let html = render(&b, "/p");
        assert!(html.contains("data-testid=\"pipeline-source\">bmad-6.11+</span>"));
        let build = html
            .find("data-phase=\"build\"><strong>build</strong> bmad-build-auto")
            .unwrap();
        let review = html
            .find("data-phase=\"code-review\"><strong>code-review</strong>")
            .unwrap();
        assert!(build < review);
        assert!(html.contains("(skill, <code>.claude/skills/bmad-build-auto</code>)"));
        assert!(html.contains("is installed &lt;here&gt;"));
    }

    #[test]
    fn keys_the_columns_cannot_show_are_listed_with_their_lines() {
        let html = render(&board(), "/p");
        let odd = html.find("id=\"epic-not-runnable\"").unwrap();
        assert!(html[odd..].contains(
            "line 7: <code>1-3-x: blocked</code> a mark that the work waits on something"
        ));
        let outside = html.find("id=\"epic-unrecognized\"").unwrap();
        assert!(html[outside..].contains("line 12: <code>epic-3a&lt;i&gt;: in-progress</code>"));
        assert!(!html.contains("<i>"));
        assert!(!html.contains("epic-legacy") && !html.contains("epic-warning"));
    }

    #[test]
    fn stories_sit_in_their_status_column_with_phase_cycle_and_questions() {
        let html = render(&board(), "/p/\"x\"");
        assert!(!html.contains("<script") && !html.contains("<b>"));
        let col = |s: &str| html.find(&format!("data-status=\"{s}\"")).unwrap();
        let story = |k: &str| html.find(&format!("data-story=\"{k}\"")).unwrap();
        assert!(story("1-1-setup") > col("done"));
        assert!(story("1-2-&lt;b&gt;login&lt;/b&gt;") > col("in-progress"));
        assert!(story("1-2-&lt;b&gt;login&lt;/b&gt;") < col("review"));
        assert!(story("1-4-y") > col("ready-for-dev") && story("1-4-y") < col("in-progress"));
        assert!(story("1-3-x") > col("other"));
        assert!(html.contains("review cycle 2"));
        assert!(html.contains("phase-dev"));
        assert!(html.contains("phase-changes-requested"));
        assert!(html.contains("class=\"story current\""));
        assert!(html.contains("href=\"/runs/0196abcd-ef01-7000\""));
        assert!(html.contains(
            "data-phase=\"create-story\" data-run-id=\"0196aaaa-&lt;1&gt;\" href=\"/runs/0196aaaa-%3C1%3E\""
        ));
        assert!(html.contains(">create-story #1</a> <span class=\"phase phase-completed\">"));
        assert!(html.contains("data-project=\"/p/&quot;x&quot;\""));
        assert!(html.contains("data-question=\"q1\""));
        assert!(html.contains("Use &quot;OAuth&quot;? &lt;script&gt;"));
        assert!(html.contains(
            "<dd id=\"epic-standing\" data-standing=\"running\"><span class=\"phase phase-running\">running</span></dd>"
        ));
        assert!(html.starts_with("<div id=\"epic-board\" data-live data-poll=\"3000\">"));
    }

    #[test]
    fn a_published_story_shows_its_branch_state_and_link() {
        use baton_epic::publish::{Failure, State, Story};
        let mut b = board();
        let story = |url: &str| Story {
            story: "1-1-setup".into(),
            epic: "epic-1".into(),
            title: "t".into(),
            branch: "baton/epic-1/1-1-setup".into(),
            base: "main".into(),
            commit: "abc".into(),
            state: State::Published,
            wait_merge: true,
            command: None,
            url: Some(url.into()),
            error: Some(Failure {
                code: "EPIC_PUBLISH_CHECK_FAILED".into(),
                message: "<b>down</b>".into(),
                hint: None,
            }),
        };
        b.epics[0].stories[0].publish = Some(story("https://forge.test/pr/1?a=1&b=\"2\""));
        let html = render(&b, "/p");
        assert!(html.contains("data-testid=\"story-publish\" data-state=\"published\"><span class=\"mono\">baton/epic-1/1-1-setup</span> <span class=\"tag\">published, waits for its merge</span> <a href=\"https://forge.test/pr/1?a=1&amp;b=&quot;2&quot;\""), "{html}");
        assert!(html.contains("publish: EPIC_PUBLISH_CHECK_FAILED: &lt;b&gt;down&lt;/b&gt;"));
        b.epics[0].stories[0].publish = Some(story("javascript:alert(1)"));
        assert!(!render(&b, "/p").contains("javascript:"));
    }
}
