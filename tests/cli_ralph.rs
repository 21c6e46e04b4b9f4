//! Compatibility suite for `baton ralph`: maestro's `ralph` CLI (v0.4.18) behaviour by
//! behaviour — `skills`, `check`, `session`, `next`, `complete`, `retry`, session discovery and
//! the status.json format — each scenario a project and a fake HOME with command files and
//! sessions, a verb sequence, and the exit codes, output lines and status.json after each.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::ralph_support;

use ralph_support::*;
use serde_json::{Value, json};

const ID: &str = "ralph-20260524-101500";

// ---------------------------------------------------------------------------------- skills --

#[test]
fn c01_skills_project_overrides_global_and_the_table_is_maestros() {
    let fx = Fx::new();
    fx.file(
        ".claude/commands/maestro-plan.md",
        "---\nname: maestro-plan\ndescription: project plan\nargument-hint: \"<phase>\"\n---\nbody\n",
    );
    fx.file(
        ".claude/skills/my-skill/SKILL.md",
        "---\ndescription: a skill\n---\n<required_reading>\n@missing.md\n</required_reading>\n",
    );
    let out = fx.ralph(&["skills"]);
    out.code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "PLATFORM TYPE     SCOPE    NAME                            HINT                        REQ DEF"
    );
    assert_eq!(lines[1], "─".repeat(94));
    assert_eq!(
        lines[2],
        "claude   command  global   maestro-analyze                 <phase> | \"<intent>\"          1   1  "
    );
    let plan = lines.iter().find(|l| l.contains("maestro-plan ")).unwrap();
    assert_eq!(
        *plan,
        "claude   command  project  maestro-plan                    <phase>                       0   0  "
    );
    let skill = lines.last().unwrap();
    assert_eq!(
        *skill,
        "  15 entries (14 command, 1 skill) — 1 with missing required_reading (!)"
    );
    let my = lines.iter().find(|l| l.contains("my-skill")).unwrap();
    assert!(
        my.starts_with("claude   skill    project  my-skill "),
        "{my}"
    );
    assert!(my.ends_with("  1   0 !"), "{my:?}");
    // --quiet: entries only.
    let quiet = fx.ralph(&["skills", "--quiet"]);
    assert!(
        quiet
            .stdout
            .lines()
            .next()
            .unwrap()
            .starts_with("claude   command  global   maestro-analyze")
    );
    assert_eq!(quiet.stdout.lines().count(), 15);
}

#[test]
fn c02_skills_json_lines_and_platform_filter() {
    let fx = Fx::new();
    let codex = fx.home.join(".codex/skills/maestro-plan/SKILL.md");
    std::fs::create_dir_all(codex.parent().unwrap()).unwrap();
    std::fs::write(&codex, "---\nname: maestro-plan\n---\nx\n").unwrap();
    let out = fx.ralph(&["skills", "--json", "--platform", "codex"]);
    out.code(0);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(
        keys(&lines[0]),
        [
            "type",
            "scope",
            "platform",
            "name",
            "path",
            "hint",
            "description",
            "required",
            "deferred",
            "missing_required"
        ]
    );
    assert_eq!(lines[0]["platform"], "codex");
    assert_eq!(lines[0]["type"], "skill");
    // Compact, one object per line, as JSON.stringify prints it.
    assert!(
        out.stdout
            .starts_with("{\"type\":\"skill\",\"scope\":\"global\",\"platform\":\"codex\"")
    );
    let all = fx.ralph(&["skills", "--json"]);
    assert_eq!(all.stdout.lines().count(), 15);
}

#[test]
fn c03_skills_rejects_an_unknown_platform_with_exit_2() {
    let fx = Fx::new();
    let out = fx.ralph(&["skills", "--platform", "gemini"]);
    out.code(2);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "[ralph skills] PLATFORM_INVALID: --platform must be one of: claude, codex, agent, agy (got \"gemini\")"
    );
    assert!(out.stdout.is_empty());
}

// ----------------------------------------------------------------------------------- check --

#[test]
fn c04_check_a_clean_session() {
    let fx = Fx::new();
    fx.put(ID, &simple(&fx, ID));
    let out = fx.ralph(&["check"]);
    out.code(0);
    assert_eq!(
        out.stdout,
        format!(
            "session: {ID}\nstatus:  running\nsteps:   3\n\n  ✓ no issues found\n\n  summary: 0 errors, 0 warnings\n"
        )
    );
    let before = fx.raw(ID);
    let json = fx.ralph(&["check", "--json"]);
    json.code(0);
    assert_eq!(json.json()["ok"], true);
    assert_eq!(fx.raw(ID), before, "check writes nothing");
}

#[test]
fn c05_check_reports_the_command_file_catalogue() {
    let fx = Fx::new();
    let broken = fx.file(
        ".claude/commands/broken.md",
        "---\nname: renamed\n---\n<required_reading>\n@gone.md\n</required_reading>\n",
    );
    let broken = broken.display().to_string();
    let mut doc = session(
        ID,
        vec![
            exec(
                0,
                "maestro-plan",
                "1",
                "completed",
                "/nowhere/maestro-plan.md",
            ),
            exec(1, "maestro-execute", "1", "pending", ""),
            exec(2, "broken", "", "pending", &broken),
            exec(
                3,
                "maestro-verify",
                "1",
                "completed",
                &fx.command_path("maestro-verify"),
            ),
            exec(
                4,
                "quality-review",
                "1",
                "pending",
                &fx.command_path("quality-review"),
            ),
        ],
    );
    step_mut(&mut doc, 1).insert("command_path".into(), Value::Null);
    step_mut(&mut doc, 3).insert("completion_confirmed".into(), json!(false));
    fx.put(ID, &doc);
    let out = fx.ralph(&["check"]);
    out.code(1);
    let findings: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("  ✗") || l.starts_with("  !"))
        .collect();
    let gone = fx
        .project
        .join(".claude/commands/gone.md")
        .display()
        .to_string();
    assert_eq!(
        findings,
        [
            "  ! W006 [step 3]: step.status=completed but completion_confirmed=false".to_string(),
            "  ✗ E006 [step 0]: command_path missing on disk: /nowhere/maestro-plan.md".into(),
            "  ✗ E006 [step 1]: execution step has no command_path (skill=\"maestro-execute\")".into(),
            format!("  ✗ E007 [step 2]: required_reading missing: {gone}"),
            "  ! W007 [step 2]: step.skill \"broken\" != frontmatter.name \"renamed\"".into(),
            "  ! W008 [step 4]: chain does not terminate with milestone-complete (last skill: quality-review)".into(),
        ]
    );
    assert!(out.stdout.ends_with("  summary: 3 errors, 3 warnings\n"));
    let j = fx.ralph(&["check", "--json"]);
    j.code(1);
    let j = j.json();
    assert_eq!(j["ok"], false);
    assert_eq!(j["errors"], 3);
    assert_eq!(j["warnings"], 3);
    assert_eq!(
        j["findings"][1],
        json!({"level": "E", "code": "E006", "message": "command_path missing on disk: /nowhere/maestro-plan.md", "step_index": 0})
    );
}

#[test]
fn c06_check_reports_schema_damage_with_its_location() {
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    step_mut(&mut doc, 1).insert("index".into(), json!(7));
    step_mut(&mut doc, 2).remove("stage");
    step_mut(&mut doc, 2).insert("status".into(), json!("done"));
    fx.put(ID, &doc);
    let out = fx.ralph(&["check", "--session", ID]);
    out.code(1);
    assert!(
        out.stdout
            .contains("  ✗ E010 [step 1]: step.index 7 != position 1\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("  ✗ E010 [step 2]: step is missing required field: stage\n")
    );
    assert!(out.stdout.contains("  ✗ E010 [step 2]: step.status must be one of pending|running|completed|skipped|failed, found \"done\"\n"));
    // steps not an array: maestro's two findings, and nothing else is attempted.
    let mut doc = simple(&fx, ID);
    set(&mut doc, "steps", json!({"0": {}}));
    fx.put(ID, &doc);
    let out = fx.ralph(&["check", "--session", ID, "--json"]);
    out.code(1);
    let f = &out.json()["findings"];
    assert_eq!(f.as_array().unwrap().len(), 1);
    assert_eq!(f[0]["message"], "session.steps is not an array");
}

#[test]
fn c07_check_active_pointer_findings() {
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    set(&mut doc, "active_step_index", json!(9));
    fx.put(ID, &doc);
    let out = fx.ralph(&["check"]);
    out.code(1);
    assert!(
        out.stdout
            .contains("  ✗ E008: active_step_index 9 out of range\n")
    );

    step_mut(&mut doc, 0).insert("status".into(), json!("completed"));
    step_mut(&mut doc, 0).insert("completion_confirmed".into(), json!(true));
    set(&mut doc, "active_step_index", json!(0));
    fx.put(ID, &doc);
    let out = fx.ralph(&["check"]);
    out.code(0);
    assert!(out.stdout.contains(
        "  ! W005 [step 0]: active_step_index points to a completed step; next will auto-clear\n"
    ));

    step_mut(&mut doc, 0).insert("status".into(), json!("skipped"));
    fx.put(ID, &doc);
    let out = fx.ralph(&["check"]);
    out.code(1);
    assert!(out.stdout.contains("  ✗ E008 [step 0]: active_step_index step.status is \"skipped\"; expected running|pending\n"));
}

// --------------------------------------------------------------------------------- session --

#[test]
fn c08_session_prints_maestros_summary() {
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    step_mut(&mut doc, 0).insert("status".into(), json!("completed"));
    step_mut(&mut doc, 1).insert("status".into(), json!("running"));
    step_mut(&mut doc, 1).insert(
        "load".into(),
        json!({"loaded_at": "2026-05-24T10:16:00.000Z", "required_files": ["/a"], "deferred_files": [], "resolve_version": "1"}),
    );
    set(&mut doc, "active_step_index", json!(1));
    set(&mut doc, "ralph_protocol_version", json!("1"));
    set(
        &mut doc,
        "task_decomposition",
        json!([{"id": "G1", "goal": "CSV export works", "status": "done"}, {"id": "G2", "goal": "docs", "status": "pending"}]),
    );
    fx.put(ID, &doc);
    let out = fx.ralph(&["session"]);
    out.code(0);
    let cmd = fx.command_path("maestro-execute");
    assert_eq!(
        out.stdout,
        format!(
            "session:           {ID}
status:            running
lifecycle:         plan
phase:             1
milestone:         M1
quality_mode:      standard
planning_mode:     independent
protocol_version:  1
progress:          1/3
active_step_index: 1
revision:          0

  ▸ step 1: maestro-execute
    status:  running
    command: {cmd}
    loaded:  2026-05-24T10:16:00.000Z (req: 1, def: 0)

  sub-goals: 1/2
    [x] G1: CSV export works
    [ ] G2: docs
"
        )
    );
}

#[test]
fn c09_no_session_is_exit_1_for_every_verb() {
    let fx = Fx::new();
    for (verb, args) in [
        ("check", vec!["check"]),
        ("session", vec!["session"]),
        ("next", vec!["next"]),
        ("complete", vec!["complete", "0", "--status", "DONE"]),
        ("retry", vec!["retry", "0"]),
    ] {
        let out = fx.ralph(&args);
        out.code(1);
        assert!(
            out.stderr
                .starts_with(&format!("[ralph {verb}] SESSION_NOT_FOUND: ")),
            "{verb}: {}",
            out.stderr
        );
    }
    let out = fx.ralph(&["session", "--session", "ralph-20990101-000000"]);
    out.code(1);
    assert!(out.stderr.starts_with(
        "[ralph session] SESSION_NOT_FOUND: session not found: ralph-20990101-000000"
    ));
    assert!(!fx.sessions().exists(), "nothing created");
}

// ------------------------------------------------------------------------------------ next --

#[test]
fn c10_next_prints_the_prompt_and_claims_the_step() {
    let fx = Fx::new();
    fx.put(ID, &simple(&fx, ID));
    let out = fx
        .cmd(&["next"])
        .env("BATON_RALPH_CLI", "maestro ralph")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = format!(
        "<purpose>
Plan one phase into tasks. This is a sample command file for baton's ralph tests and examples.
</purpose>

<required_reading>

<!-- inlined @~/.maestro/workflows/plan.md -->
# Workflow: plan

1. Read the inputs of the plan stage.
2. Do the work.
3. Record the result and its evidence.

<!-- /inlined -->

</required_reading>

<deferred_reading>
- [report template](~/.maestro/templates/report.md)
</deferred_reading>

<execution>
Follow the workflow above with the arguments `$ARGUMENTS`, and write what you produce under
`.workflow/scratch/`.
</execution>

## Completion (when invoked from ralph)

End the step with exactly one of the commands printed at the end of the prompt.

<!-- maestro ralph: step [0/3] skill=maestro-plan args=\"1\" session={ID} -->
<!-- On finish, run exactly one of:
       maestro ralph complete 0 --status DONE [--evidence <path>]
       maestro ralph complete 0 --status DONE_WITH_CONCERNS --concerns \"...\"
       maestro ralph retry 0
       maestro ralph complete 0 --status BLOCKED --reason \"<external blocker>\" -->
"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);

    let doc = fx.get(ID);
    let step = &doc["steps"][0];
    assert_eq!(step["status"], "running");
    assert_eq!(doc["active_step_index"], 0);
    assert_eq!(doc["ralph_protocol_version"], "1");
    let home = fx.home.display().to_string();
    assert_eq!(
        step["load"]["required_files"],
        json!([format!("{home}/.maestro/workflows/plan.md")])
    );
    assert_eq!(
        step["load"]["deferred_files"],
        json!([format!("{home}/.maestro/templates/report.md")])
    );
    assert_eq!(step["load"]["resolve_version"], "1");
    assert_eq!(step["deferred_reads"], step["load"]["deferred_files"]);
    assert!(step["load"]["loaded_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(doc["revision"], 1);
    assert_eq!(doc["active_claim"]["index"], 0);
}

#[test]
fn c11_next_refuses_while_a_step_is_active_with_exit_3() {
    let fx = Fx::new();
    fx.put(ID, &simple(&fx, ID));
    fx.ralph(&["next", "--owner", "agent-a"]).code(0);
    let before = fx.raw(ID);
    let out = fx.ralph(&["next"]);
    out.code(3);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(
        lines[0],
        "[ralph next] STEP_ACTIVE: step 0 is still active (status=running)"
    );
    assert!(
        lines[1].starts_with("  → claimed by agent-a since 20"),
        "{}",
        lines[1]
    );
    assert_eq!(
        lines[2],
        "  → run: baton ralph complete 0 --status DONE|..."
    );
    assert_eq!(lines[3], "    or:  baton ralph retry 0");
    assert!(out.stdout.is_empty());
    assert_eq!(fx.raw(ID), before, "nothing written");
}

#[test]
fn c12_next_clears_a_completed_active_pointer() {
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    step_mut(&mut doc, 0).insert("status".into(), json!("completed"));
    set(&mut doc, "active_step_index", json!(0));
    fx.put(ID, &doc);
    fx.ralph(&["next"]).code(0);
    let doc = fx.get(ID);
    assert_eq!(doc["active_step_index"], 1);
    assert_eq!(doc["steps"][1]["status"], "running");
    assert_eq!(doc["steps"][0]["status"], "completed");
}

#[test]
fn c13_next_exit_2_when_nothing_is_loadable() {
    let fx = Fx::new();
    let mut doc = session(
        ID,
        vec![
            exec(
                0,
                "maestro-verify",
                "1",
                "completed",
                &fx.command_path("maestro-verify"),
            ),
            gate(1, "post-verify", "pending"),
            exec(
                2,
                "maestro-milestone-complete",
                "",
                "pending",
                &fx.command_path("maestro-milestone-complete"),
            ),
        ],
    );
    fx.put(ID, &doc);
    let before = fx.raw(ID);
    let out = fx.ralph(&["next"]);
    out.code(2);
    // maestro would jump over the pending gate and run step 2; the gate stops next here.
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "[ralph next] DECISION_NEXT: next pending step is a decision node: post-verify"
    );
    assert!(
        out.stderr
            .contains("  → do NOT skip to later execution steps\n")
    );
    assert_eq!(fx.raw(ID), before);

    for i in [1, 2] {
        step_mut(&mut doc, i).insert("status".into(), json!("completed"));
    }
    fx.put(ID, &doc);
    let out = fx.ralph(&["next"]);
    out.code(2);
    assert_eq!(
        out.stderr,
        "[ralph next] NOTHING_PENDING: no pending steps — all complete\n"
    );
}

#[test]
fn c14_next_refuses_a_paused_session() {
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    set(&mut doc, "status", json!("paused"));
    fx.put(ID, &doc);
    let out = fx.ralph(&["next"]);
    out.code(1);
    assert_eq!(
        out.stderr,
        "[ralph next] SESSION_NOT_RUNNING: session is \"paused\", not running\n  → run: baton ralph resume\n"
    );
}

#[test]
fn c15_next_missing_required_reading_is_e007_and_writes_nothing() {
    let fx = Fx::new();
    std::fs::remove_file(fx.home.join(".maestro/workflows/plan.md")).unwrap();
    fx.put(ID, &simple(&fx, ID));
    let before = fx.raw(ID);
    let out = fx.ralph(&["next"]);
    out.code(1);
    let missing = fx
        .home
        .join(".maestro/workflows/plan.md")
        .display()
        .to_string();
    assert_eq!(
        out.stderr.lines().take(3).collect::<Vec<_>>(),
        [
            "[ralph next] E007: status.json has errors:",
            &format!("  E007 [step 0]: required_reading missing: {missing}"),
            "  → run `baton ralph check` for details; `baton ralph resume` clears a stale active step",
        ]
    );
    assert_eq!(fx.raw(ID), before);
}

#[test]
fn c16_next_step_without_command_path_is_e006() {
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    step_mut(&mut doc, 0).insert("command_path".into(), Value::Null);
    fx.put(ID, &doc);
    let out = fx.ralph(&["next"]);
    out.code(1);
    assert!(out.stderr.starts_with("[ralph next] E006: status.json has errors:\n  E006 [step 0]: execution step has no command_path (skill=\"maestro-plan\")\n"), "{}", out.stderr);
}

#[test]
fn c17_next_injects_skill_config_defaults() {
    let fx = Fx::new();
    std::fs::write(
        fx.home.join(".maestro/skill-config.json"),
        r#"{"version":"1.0.0","skills":{"maestro-plan":{"params":{"--depth":"deep","--auto":true,"--tier":"full"}}}}"#,
    )
    .unwrap();
    fx.file(
        ".maestro/skill-config.json",
        r#"{"version":"1.0.0","skills":{"maestro-plan":{"params":{"--tier":"quick"}}}}"#,
    );
    let mut doc = simple(&fx, ID);
    step_mut(&mut doc, 0).insert("args".into(), json!("1 --auto"));
    fx.put(ID, &doc);
    let out = fx.ralph(&["next"]);
    out.code(0);
    assert!(
        out.stdout.contains(
            "End the step with exactly one of the commands printed at the end of the prompt.\n\n\n## Skill Config Defaults (maestro-plan)\nThe following parameter defaults are configured. Apply these unless the user explicitly specified otherwise:\n--depth: deep\n--tier: quick\n<!-- baton ralph: step [0/3] skill=maestro-plan args=\"1 --auto\""
        ),
        "{}",
        out.stdout
    );
}

// -------------------------------------------------------------------------------- complete --

fn claimed(fx: &Fx) {
    fx.put(ID, &simple(fx, ID));
    fx.ralph(&["next"]).code(0);
}

#[test]
fn c18_complete_done_records_the_evidence() {
    let fx = Fx::new();
    claimed(&fx);
    let out = fx.ralph(&[
        "complete",
        "0",
        "--status",
        "DONE",
        "--evidence",
        "plan.json",
    ]);
    out.code(0);
    assert_eq!(
        out.stderr,
        format!("[ralph complete] session={ID} step=0 status=DONE\n")
    );
    assert!(out.stdout.is_empty());
    let doc = fx.get(ID);
    let s = &doc["steps"][0];
    assert_eq!(s["status"], "completed");
    assert_eq!(s["completion_confirmed"], true);
    assert_eq!(s["completion_status"], "DONE");
    assert_eq!(s["completion_evidence"], "plan.json");
    assert_eq!(s["concerns"], Value::Null);
    assert!(s["completed_at"].as_str().unwrap().contains('T'));
    assert_eq!(doc["active_step_index"], Value::Null);
    // Several --evidence: an array.
    fx.ralph(&["next"]).code(0);
    fx.ralph(&[
        "complete",
        "1",
        "--status",
        "done",
        "--evidence",
        "a",
        "--evidence",
        "b",
    ])
    .code(0);
    assert_eq!(
        fx.get(ID)["steps"][1]["completion_evidence"],
        json!(["a", "b"])
    );
}

#[test]
fn c19_complete_with_concerns_and_blocked() {
    let fx = Fx::new();
    claimed(&fx);
    fx.ralph(&[
        "complete",
        "0",
        "--status",
        "DONE_WITH_CONCERNS",
        "--concerns",
        "slow",
    ])
    .code(0);
    let doc = fx.get(ID);
    assert_eq!(doc["steps"][0]["concerns"], "slow");
    assert_eq!(doc["steps"][0]["completion_status"], "DONE_WITH_CONCERNS");
    assert_eq!(doc["steps"][0]["completion_confirmed"], true);

    fx.ralph(&["next"]).code(0);
    let out = fx.ralph(&[
        "complete",
        "1",
        "--status",
        "BLOCKED",
        "--reason",
        "no database",
    ]);
    out.code(0);
    let doc = fx.get(ID);
    assert_eq!(doc["steps"][1]["status"], "failed");
    assert_eq!(doc["steps"][1]["concerns"], "no database");
    assert_eq!(doc["steps"][1]["completion_confirmed"], false);
    assert_eq!(doc["status"], "paused");
    assert_eq!(doc["active_step_index"], Value::Null);
}

#[test]
fn c20_retry_puts_the_step_back_to_pending() {
    let fx = Fx::new();
    claimed(&fx);
    let out = fx.ralph(&["retry", "0"]);
    out.code(0);
    assert_eq!(
        out.stderr,
        format!("[ralph complete] session={ID} step=0 status=NEEDS_RETRY\n")
    );
    let doc = fx.get(ID);
    let s = &doc["steps"][0];
    assert_eq!(s["status"], "pending");
    assert_eq!(s["retried"], true);
    assert_eq!(s["completion_status"], "NEEDS_RETRY");
    assert_eq!(s["completed_at"], Value::Null);
    assert_eq!(doc["active_step_index"], Value::Null);
    // No limit in the CLI: the step is claimed again.
    fx.ralph(&["next"]).code(0);
    assert_eq!(fx.get(ID)["active_step_index"], 0);
}

#[test]
fn c21_complete_checks_e008_e009_and_the_range() {
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    fx.put(ID, &doc);
    let out = fx.ralph(&["complete", "0", "--status", "DONE"]);
    out.code(1);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "[ralph complete] E008: index 0 != active_step_index (none)"
    );
    // The deadlock maestro leaves: the pointer on a pending step.
    set(&mut doc, "active_step_index", json!(0));
    fx.put(ID, &doc);
    let out = fx.ralph(&["complete", "0", "--status", "DONE"]);
    out.code(1);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "[ralph complete] E009: step 0.status is \"pending\", expected \"running\""
    );
    let out = fx.ralph(&["complete", "1", "--status", "DONE"]);
    out.code(1);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "[ralph complete] E008: index 1 != active_step_index 0"
    );
    let out = fx.ralph(&["complete", "3", "--status", "DONE"]);
    out.code(1);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "[ralph complete] INDEX_OUT_OF_RANGE: step index 3 out of range (0..2)"
    );
    let out = fx.ralph(&["complete", "99999999999999999999999", "--status", "DONE"]);
    out.code(1);
    assert!(out.stderr.contains("out of range (0..2)"));
}

#[test]
fn c22_complete_argument_errors_exit_2() {
    let fx = Fx::new();
    claimed(&fx);
    let before = fx.raw(ID);
    let cases: [(&[&str], &str); 4] = [
        (
            &["complete", "0", "--status", "FINISHED"],
            "[ralph complete] STATUS_INVALID: --status must be one of: DONE, DONE_WITH_CONCERNS, NEEDS_RETRY, BLOCKED (got \"FINISHED\")",
        ),
        (
            &["complete", "0", "--status", "NEEDS_CONTEXT"],
            "[ralph complete] STATUS_INVALID: --status must be one of: DONE, DONE_WITH_CONCERNS, NEEDS_RETRY, BLOCKED (got \"NEEDS_CONTEXT\")",
        ),
        (
            &["complete", "3abc", "--status", "DONE"],
            "[ralph complete] INDEX_INVALID: <index> must be a non-negative integer (got \"3abc\")",
        ),
        (
            &["retry", "x"],
            "[ralph retry] INDEX_INVALID: <index> must be a non-negative integer (got \"x\")",
        ),
    ];
    for (args, line) in cases {
        let out = fx.ralph(args);
        out.code(2);
        assert_eq!(out.stderr.lines().next().unwrap(), line);
    }
    // What maestro's parser refuses itself (`-1` read as an option, `--status` missing)
    // exits 1, as there: cli_ralph_slips.
    assert_eq!(fx.raw(ID), before, "nothing written");
}

// ------------------------------------------------------------------ discovery and the file --

#[test]
fn c23_discovery_takes_the_newest_running_or_paused_session() {
    let fx = Fx::new();
    let old = "maestro-20260101-090000";
    let done = "ralph-20260601-090000";
    let mut running = simple(&fx, old);
    set(&mut running, "source", json!("maestro"));
    fx.put(old, &running);
    let mut finished = simple(&fx, done);
    set(&mut finished, "status", json!("completed"));
    fx.put(done, &finished);
    set_mtime(&fx.dir(old), 100);
    set_mtime(&fx.dir(done), 10);
    // maestro would take the newest directory (the completed session) and refuse; the newest
    // running session is the one meant.
    let out = fx.ralph(&["next", "--json"]);
    out.code(0);
    assert_eq!(out.json()["session_id"], old);
    // Read-only verbs fall back to the newest session of any status.
    fx.ralph(&["abandon", "--session", old]).code(0);
    set_mtime(&fx.dir(old), 100);
    assert_eq!(fx.ralph(&["session", "--json"]).json()["session_id"], done);
    // Explicit --session works for any session.
    assert_eq!(
        fx.ralph(&["check", "--session", old, "--json"]).json()["session_id"],
        old
    );
}

#[test]
fn c24_unknown_fields_and_field_order_survive_every_write() {
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    set(
        &mut doc,
        "x_dashboard",
        json!({"color": "blue", "pinned": [1, 2]}),
    );
    step_mut(&mut doc, 0).insert("type".into(), json!("skill"));
    step_mut(&mut doc, 0).insert("x_note".into(), json!("keep me"));
    fx.put(ID, &doc);
    let top_before = keys(&doc);
    let step_before = keys(&doc["steps"][0]);
    fx.ralph(&["next"]).code(0);
    fx.ralph(&["complete", "0", "--status", "DONE"]).code(0);
    let raw = String::from_utf8(fx.raw(ID)).unwrap();
    let after: Value = serde_json::from_str(&raw).unwrap();
    // 2-space JSON, no trailing newline: JSON.stringify(data, null, 2).
    assert_eq!(raw, stringify(&after));
    assert!(!raw.ends_with('\n'));
    assert_eq!(
        after["x_dashboard"],
        json!({"color": "blue", "pinned": [1, 2]})
    );
    assert_eq!(after["steps"][0]["x_note"], "keep me");
    // Known fields keep their places; new ones are appended in the order they were first set.
    let top_after = keys(&after);
    assert_eq!(&top_after[..top_before.len()], &top_before[..]);
    assert_eq!(
        &top_after[top_before.len()..],
        ["ralph_protocol_version", "active_claim", "revision"]
    );
    let step_after = keys(&after["steps"][0]);
    assert_eq!(&step_after[..step_before.len()], &step_before[..]);
    assert_eq!(&step_after[step_before.len()..], ["concerns"]);
}

#[test]
fn c25_each_reference_is_inlined_with_its_own_file() {
    let fx = Fx::new();
    fx.file("docs/a.md", "AAA\n");
    fx.file("docs/b.md", "BBB\n");
    fx.file("docs/c.md", "CCC\n");
    let cmd = fx.file(
        ".claude/commands/multi.md",
        "---\nname: multi\n---\n<required_reading>\n@../../docs/a.md @../../docs/b.md\n</required_reading>\n\n```md\n<required_reading>\n@not-read.md\n</required_reading>\n```\n\n<required_reading>\n- ../../docs/c.md\n</required_reading>\nend\n",
    );
    let mut doc = simple(&fx, ID);
    step_mut(&mut doc, 0).insert("skill".into(), json!("multi"));
    step_mut(&mut doc, 0).insert("command_path".into(), json!(cmd.display().to_string()));
    fx.put(ID, &doc);
    let out = fx.ralph(&["next"]);
    out.code(0);
    // The first block is maestro's required reading (each file under its own reference);
    // the fenced sample is not a block; a later block is left as written (maestro never
    // reads it).
    assert!(out.stdout.starts_with(
        "<required_reading>\n\n<!-- inlined @../../docs/a.md -->\nAAA\n\n<!-- /inlined -->\n<!-- inlined @../../docs/b.md -->\nBBB\n\n<!-- /inlined -->\n\n</required_reading>\n\n```md\n<required_reading>\n@not-read.md\n</required_reading>\n```\n\n<required_reading>\n- ../../docs/c.md\n</required_reading>\nend\n"
    ), "{}", out.stdout);
    let required = &fx.get(ID)["steps"][0]["load"]["required_files"];
    let docs = fx.project.join("docs").display().to_string();
    assert_eq!(
        required,
        &json!([format!("{docs}/a.md"), format!("{docs}/b.md")])
    );
}

#[test]
fn c26_session_ids_are_folder_names_only() {
    let fx = Fx::new();
    fx.put(ID, &simple(&fx, ID));
    std::fs::create_dir_all(fx.project.join(".workflow/x")).unwrap();
    std::fs::write(
        fx.project.join(".workflow/x/status.json"),
        stringify(&simple(&fx, "x")),
    )
    .unwrap();
    for bad in ["../x", "/etc", "a/b", "..", ""] {
        let out = fx.ralph(&["next", "--session", bad]);
        out.code(2);
        assert!(
            out.stderr.starts_with(
                "[ralph next] SESSION_ID_INVALID: --session must be a session folder name"
            ),
            "{bad}: {}",
            out.stderr
        );
    }
    assert_eq!(fx.get(ID)["active_step_index"], Value::Null);
    let outside: Value =
        serde_json::from_slice(&std::fs::read(fx.project.join(".workflow/x/status.json")).unwrap())
            .unwrap();
    assert_eq!(
        outside["active_step_index"],
        Value::Null,
        "the file outside .maestro is untouched"
    );
}

#[test]
fn c27_without_a_home_only_the_projects_commands_count() {
    let fx = Fx::new();
    fx.file(".claude/commands/mine.md", "---\nname: mine\n---\nx\n");
    // The current directory is not the project: its stray command file is nobody's.
    let elsewhere = fx.tmp.path().join("elsewhere");
    std::fs::create_dir_all(elsewhere.join(".claude/commands")).unwrap();
    std::fs::write(elsewhere.join(".claude/commands/stray.md"), "x\n").unwrap();
    let project = fx.project.display().to_string();
    let out = fx
        .cmd(&["skills", "--json", "--project", &project])
        .current_dir(&elsewhere)
        .env_remove("HOME")
        .env_remove("USERPROFILE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(names, ["mine"]);
}

// ------------------------------------------------------------------------------- the slips --
//
// Where `baton ralph` answered differently from the real maestro v0.4.18 CLI although maestro
// was right (recorded answers: 139 of 155 commands matched), one test each: baton now answers
// as maestro does, and adds what it knows as a warning.

const OLD: &str = "ralph-20260524-101500";
const NEW: &str = "ralph-20260601-090000";

/// A running session (older) and, beside it, a newer folder whose status.json is not JSON.
fn running_beside_a_broken_folder(fx: &Fx) {
    fx.put(OLD, &simple(fx, OLD));
    fx.put_raw(
        NEW,
        b"{\"session_id\": \"ralph-20260601-090000\", \"status\": ",
    );
    set_mtime(&fx.dir(OLD), 100);
    set_mtime(&fx.dir(NEW), 10);
}

#[test]
fn a_damaged_other_session_folder_is_skipped_with_a_warning() {
    let fx = Fx::new();
    running_beside_a_broken_folder(&fx);
    let warning = format!("warning: skipped session {NEW}: its status.json is damaged");

    // session, check and next serve the valid running session, as maestro does.
    let out = fx.ralph(&["session"]);
    out.code(0);
    assert!(
        out.stdout
            .starts_with(&format!("session:           {OLD}\n"))
    );
    assert!(
        out.stderr
            .starts_with(&format!("[ralph session] {warning}")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains(&format!("baton ralph check --session {NEW}"))
    );

    let out = fx.ralph(&["check", "--json"]);
    out.code(0);
    assert_eq!(out.json()["session_id"], OLD);
    assert!(out.stderr.contains(&warning), "{}", out.stderr);

    let out = fx.ralph(&["next", "--json"]);
    out.code(0);
    assert_eq!(out.json()["session_id"], OLD);
    assert_eq!(fx.get(OLD)["active_step_index"], 0);
    assert!(out.stderr.contains(&format!("[ralph next] {warning}")));

    // The damage stays local: the broken folder is untouched and reported when named.
    assert_eq!(
        fx.raw(NEW),
        b"{\"session_id\": \"ralph-20260601-090000\", \"status\": "
    );
    let out = fx.ralph(&["check", "--session", NEW]);
    out.code(1);
    assert!(
        out.stdout.contains("  ✗ E010: not valid JSON"),
        "{}",
        out.stdout
    );
    // A verb baton added warns in baton's format (the broken folder newest again: `next`
    // wrote in the other one).
    set_mtime(&fx.dir(OLD), 100);
    let out = fx.ralph(&["status"]);
    out.code(0);
    assert!(out.stderr.starts_with(&warning), "{}", out.stderr);
}

#[test]
fn session_shows_a_schema_damaged_status_json_with_its_findings() {
    let fx = Fx::new();
    let mut doc = simple(&fx, OLD);
    step_mut(&mut doc, 1).insert("status".into(), json!("done"));
    step_mut(&mut doc, 2).insert("index".into(), json!(7));
    fx.put(OLD, &doc);
    let out = fx.ralph(&["session", "--session", OLD]);
    out.code(0);
    assert!(out.stdout.starts_with(&format!(
        "session:           {OLD}\nstatus:            running\n"
    )));
    assert!(
        out.stdout.contains("progress:          0/3\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("\n  findings: 2 error(s), 0 warning(s)\n")
    );
    assert!(out.stdout.contains("    ✗ E010 [step 1]: step.status must be one of pending|running|completed|skipped|failed, found \"done\"\n"));
    assert!(
        out.stdout
            .contains("    ✗ E010 [step 2]: step.index 7 != position 2\n")
    );
    let json = fx.ralph(&["session", "--session", OLD, "--json"]).json();
    assert_eq!(json["session_id"], OLD);
    assert_eq!(json["findings"].as_array().unwrap().len(), 2);
    // A file that is not JSON has nothing to show.
    fx.put_raw(OLD, b"{not json");
    let out = fx.ralph(&["session", "--session", OLD]);
    out.code(1);
    assert!(
        out.stderr.starts_with("[ralph session] E010:"),
        "{}",
        out.stderr
    );
}

/// A command file with a second `<required_reading>` block naming a file that does not exist.
fn two_blocks(fx: &Fx) -> String {
    let path = fx.home.join(".claude/commands/maestro-plan.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace(
        "<execution>",
        "<required_reading>\n@~/.maestro/workflows/not-there.md\n</required_reading>\n\n<execution>",
    );
    std::fs::write(&path, text).unwrap();
    fx.home
        .join(".maestro/workflows/not-there.md")
        .display()
        .to_string()
}

#[test]
fn only_the_first_required_reading_block_is_required() {
    let fx = Fx::new();
    let missing = two_blocks(&fx);
    fx.put(OLD, &simple(&fx, OLD));
    let out = fx.ralph(&["check"]);
    out.code(0);
    assert!(
        out.stdout.contains(&format!(
            "  ! W012 [step 0]: a later <required_reading> block names a missing file (only the first block is read): {missing}\n"
        )),
        "{}",
        out.stdout
    );
    let out = fx.ralph(&["next"]);
    out.code(0);
    // The first block is inlined; the second stays as the command file wrote it.
    assert!(
        out.stdout
            .contains("<!-- inlined @~/.maestro/workflows/plan.md -->")
    );
    assert!(
        out.stdout.contains(
            "<required_reading>\n@~/.maestro/workflows/not-there.md\n</required_reading>"
        )
    );
    assert!(out.stderr.contains("W012 [step 0]"), "{}", out.stderr);
    let load = &fx.get(OLD)["steps"][0]["load"];
    assert_eq!(load["required_files"].as_array().unwrap().len(), 1);
}

#[test]
fn a_negative_active_step_index_is_e008_out_of_range() {
    let fx = Fx::new();
    let mut doc = simple(&fx, OLD);
    set(&mut doc, "active_step_index", json!(-1));
    fx.put(OLD, &doc);
    let out = fx.ralph(&["check"]);
    out.code(1);
    assert!(
        out.stdout
            .contains("  ✗ E008: active_step_index -1 out of range\n"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("E010"), "{}", out.stdout);
    let out = fx.ralph(&["next"]);
    out.code(1);
    assert!(
        out.stderr
            .starts_with("[ralph next] E008: status.json has errors:\n  E008: active_step_index -1 out of range\n"),
        "{}",
        out.stderr
    );
    let out = fx.ralph(&["complete", "0", "--status", "DONE"]);
    out.code(1);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "[ralph complete] E008: index 0 != active_step_index -1"
    );
    // resume repairs it.
    fx.ralph(&["resume"]).code(0);
    assert_eq!(fx.get(OLD)["active_step_index"], Value::Null);
}

#[test]
fn the_pointer_on_a_pending_step_keeps_maestros_exit_codes_and_warns() {
    let fx = Fx::new();
    let mut doc = simple(&fx, OLD);
    set(&mut doc, "active_step_index", json!(0));
    fx.put(OLD, &doc);
    let out = fx.ralph(&["check", "--json"]);
    out.code(0);
    let json = out.json();
    assert_eq!(json["ok"], true);
    assert_eq!(json["errors"], 0);
    assert_eq!(json["findings"][0]["code"], "W011");
    assert_eq!(json["findings"][0]["level"], "W");
    assert!(
        json["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("run `resume` to clear it")
    );
    let out = fx.ralph(&["next"]);
    out.code(3);
    assert_eq!(
        out.stderr,
        "[ralph next] STEP_ACTIVE: step 0 is still active (status=pending)\n  → the pointer is on a pending step: run baton ralph resume to clear it\n"
    );
    let out = fx.ralph(&["complete", "0", "--status", "DONE"]);
    out.code(1);
    assert!(out.stderr.starts_with("[ralph complete] E009:"));
    fx.ralph(&["resume"]).code(0);
    fx.ralph(&["next"]).code(0);
}

#[test]
fn usage_errors_of_maestros_verbs_exit_1() {
    let fx = Fx::new();
    fx.put(OLD, &simple(&fx, OLD));
    fx.ralph(&["next"]).code(0);
    let before = fx.raw(OLD);
    let out = fx.ralph(&["complete", "-1", "--status", "DONE"]);
    out.code(1);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "[ralph complete] OPTION_UNKNOWN: unknown option '-1'"
    );
    fx.ralph(&["retry", "-1"]).code(1);
    let out = fx.ralph(&["complete", "0"]);
    out.code(1);
    assert!(out.stderr.contains("--status"), "{}", out.stderr);
    fx.ralph(&["next", "--no-such-flag"]).code(1);
    fx.ralph(&["--project", ".", "check", "--bogus"]).code(1);
    // With --json the parse error is JSON, with the same code.
    let out = fx.ralph(&["complete", "0", "--json"]);
    out.code(1);
    assert_eq!(out.json()["error"]["code"], "USAGE");
    // maestro's own argument checks keep exit 2 (a bad --status value, a non-numeric index).
    fx.ralph(&["complete", "0", "--status", "FINISHED"]).code(2);
    fx.ralph(&["retry", "x"]).code(2);
    // baton's verbs keep baton's usage code.
    fx.ralph(&["skip"]).code(2);
    fx.ralph(&["decide", "0", "--verdict", "proceed"]).code(2);
    assert_eq!(fx.raw(OLD), before, "nothing written");
}

// ------------------------------------------------------------------------------ maestro v0.5 --
//
// What maestro v0.5.37–v0.5.50 changed in `ralph` (`src/ralph/`, `src/commands/ralph.ts`),
// written from those sources: protocol-2 sessions, completion records, idempotent repeats,
// the pause on an error finding, leases, the ledger, the `.agents`/`.agy` platforms and the
// session anchor. Each expected text is what maestro v0.5.50 prints for the same call.

/// A maestro v0.5 session: protocol "2", a boundary contract, one sub-goal.
fn v05(fx: &Fx, id: &str) -> Value {
    let mut doc = simple(fx, id);
    set(&mut doc, "ralph_protocol_version", json!("2"));
    set(
        &mut doc,
        "boundary_contract",
        json!({"in_scope": ["csv export"], "out_of_scope": ["xlsx"], "constraints": [],
               "definition_of_done": "tests pass"}),
    );
    set(
        &mut doc,
        "execution_criteria",
        json!(["backward compatible"]),
    );
    set(
        &mut doc,
        "task_decomposition",
        json!([{"id": "G1", "goal": "CSV export works", "boundary": "export only",
                "done_when": "export test passes", "evidence": "verification.json",
                "lifecycle": ["execute"], "status": "pending"}]),
    );
    step_mut(&mut doc, 1).insert("goal_ref".into(), json!("G1"));
    doc
}

#[test]
fn v05_complete_writes_the_completion_record_field_for_field() {
    let fx = Fx::new();
    fx.put(ID, &v05(&fx, ID));
    fx.ralph(&["next"]).code(0);
    let out = fx.ralph(&[
        "complete",
        "0",
        "--session",
        ID,
        "--status",
        "done",
        "--summary",
        "Planned the export in two tasks",
        "--decisions",
        "comma separator",
        "--decisions",
        "UTF-8 output",
        "--caveats",
        "no streaming yet",
        "--deferred",
        "xlsx export",
        "--evidence",
        ".workflow/scratch/plan.json",
    ]);
    out.code(0);
    assert_eq!(
        out.stderr,
        format!("[ralph complete] session={ID} step=0 status=DONE\n")
    );
    let step = fx.get(ID)["steps"][0].clone();
    // applyStatus's assignment order: the record fields a file lacks come after `load`.
    assert_eq!(
        keys(&step),
        [
            "index",
            "skill",
            "args",
            "stage",
            "scope",
            "decision",
            "retry_count",
            "max_retries",
            "command_scope",
            "command_path",
            "milestone_id",
            "source_artifact_ref",
            "status",
            "goal_ref",
            "completion_confirmed",
            "completion_status",
            "completion_evidence",
            "completed_at",
            "deferred_reads",
            "load",
            "completion_summary",
            "completion_decisions",
            "completion_caveats",
            "completion_deferred",
            "concerns"
        ]
    );
    assert_eq!(
        step["completion_summary"],
        "Planned the export in two tasks"
    );
    assert_eq!(
        step["completion_decisions"],
        json!(["comma separator", "UTF-8 output"])
    );
    assert_eq!(step["completion_caveats"], "no streaming yet");
    assert_eq!(step["completion_deferred"], json!(["xlsx export"]));
    assert_eq!(step["completion_evidence"], ".workflow/scratch/plan.json");
    assert_eq!(step["concerns"], Value::Null);

    // DONE_WITH_CONCERNS without record flags: null, as maestro writes them.
    fx.ralph(&["next"]).code(0);
    fx.ralph(&[
        "complete",
        "1",
        "--status",
        "DONE_WITH_CONCERNS",
        "--concerns",
        "slow",
    ])
    .code(0);
    let step = fx.get(ID)["steps"][1].clone();
    for k in [
        "completion_summary",
        "completion_decisions",
        "completion_caveats",
        "completion_deferred",
    ] {
        assert_eq!(step[k], Value::Null, "{k}");
    }
    assert_eq!(step["concerns"], "slow");

    // A v0.4.18 session (protocol "1") keeps v0.4.18's fields, unless a record flag is given.
    let old = "ralph-20260101-000000";
    fx.put(old, &simple(&fx, old));
    fx.ralph(&["next", "--session", old]).code(0);
    fx.ralph(&["complete", "0", "--session", old, "--status", "DONE"])
        .code(0);
    let step = fx.get(old)["steps"][0].clone();
    assert!(step.get("completion_summary").is_none(), "{step}");
    fx.ralph(&["next", "--session", old]).code(0);
    fx.ralph(&[
        "complete",
        "1",
        "--session",
        old,
        "--status",
        "DONE",
        "--summary",
        "did it",
    ])
    .code(0);
    let step = fx.get(old)["steps"][1].clone();
    assert_eq!(step["completion_summary"], "did it");
    assert_eq!(step["completion_decisions"], Value::Null);
}

#[test]
fn v05_a_repeated_complete_is_idempotent_and_a_different_one_is_refused() {
    let fx = Fx::new();
    fx.put(ID, &v05(&fx, ID));
    fx.ralph(&["next"]).code(0);
    let done = [
        "complete",
        "0",
        "--status",
        "DONE",
        "--summary",
        "planned",
        "--evidence",
        "a.json",
        "--evidence",
        "b.json",
    ];
    fx.ralph(&done).code(0);
    let written = fx.raw(ID);
    let out = fx.ralph(&done);
    out.code(0);
    assert_eq!(
        out.stderr,
        format!("[ralph complete] idempotent success for session={ID} step=0\n")
    );
    assert_eq!(out.stdout, "");
    assert_eq!(fx.raw(ID), written, "an idempotent repeat writes nothing");
    let json = fx.ralph(&[&done[..], &["--json"]].concat()).json();
    assert_eq!(json["idempotent"], true);
    // Another summary, other evidence, another status: refused, maestro's BLOCK line.
    for other in [
        vec!["complete", "0", "--status", "DONE", "--summary", "planned"],
        vec![
            "complete",
            "0",
            "--status",
            "DONE",
            "--summary",
            "other",
            "--evidence",
            "a.json",
            "--evidence",
            "b.json",
        ],
        vec!["complete", "0", "--status", "BLOCKED", "--reason", "x"],
    ] {
        let out = fx.ralph(&other);
        out.code(1);
        assert_eq!(
            out.stderr.lines().next().unwrap(),
            "[ralph complete] BLOCK: conflicting completion result repeated for step 0",
            "{other:?}"
        );
    }
    assert_eq!(fx.raw(ID), written);
    // A repeated BLOCKED (the session paused) is idempotent too.
    fx.ralph(&["next"]).code(0);
    let blocked = ["complete", "1", "--status", "BLOCKED", "--reason", "no db"];
    fx.ralph(&blocked).code(0);
    assert_eq!(fx.get(ID)["status"], "paused");
    fx.ralph(&[&blocked[..], &["--session", ID]].concat())
        .code(0);
}

#[test]
fn v05_an_error_finding_during_next_pauses_a_protocol_2_session() {
    let fx = Fx::new();
    let mut doc = v05(&fx, ID);
    step_mut(&mut doc, 0).insert("command_path".into(), Value::Null);
    fx.put(ID, &doc);
    let out = fx.ralph(&["next"]);
    out.code(1);
    assert_eq!(
        out.stderr,
        format!(
            "[ralph next] E006: status.json has errors:\n  E006 [step 0]: execution step has no command_path (skill=\"maestro-plan\")\n  → session paused; fix status.json (`baton ralph check` lists the problems), then `baton ralph resume`\n"
        )
    );
    let doc = fx.get(ID);
    assert_eq!(doc["status"], "paused");
    assert_eq!(doc["active_step_index"], Value::Null);
    // The loop's next call stops at "paused" instead of the same error again.
    let out = fx.ralph(&["next", "--session", ID]);
    out.code(1);
    assert!(out.stderr.starts_with("[ralph next] SESSION_NOT_RUNNING"));
}

#[test]
fn v05_lease_flags_are_recorded_by_next_and_checked_under_the_lock() {
    let fx = Fx::new();
    fx.put(ID, &v05(&fx, ID));
    let lease = [
        "--execution-owner",
        "ralph-execute",
        "--lease-id",
        "L1",
        "--owner-epoch",
        "3",
    ];
    let out = fx.ralph(&[&["next", "--json"][..], &lease[..]].concat());
    out.code(0);
    assert_eq!(out.json()["owner"], "ralph-execute", "the claim's owner");
    let doc = fx.get(ID);
    let k = keys(&doc);
    // maestro's assignment order, after the fields the file had; then baton's claim and
    // the revision of the write.
    assert_eq!(
        k[k.len() - 5..],
        [
            "execution_owner",
            "lease_id",
            "owner_epoch",
            "active_claim",
            "revision"
        ]
    );
    assert_eq!(doc["execution_owner"], "ralph-execute");
    assert_eq!(doc["lease_id"], "L1");
    assert_eq!(doc["owner_epoch"], 3);
    let before = fx.raw(ID);
    let refusals: [(Vec<&str>, &str); 5] = [
        (
            vec!["complete", "0", "--status", "DONE"],
            "[ralph complete] LEASE_CONFLICT: lease conflict: session owned by \"ralph-execute\", got executionOwner \"undefined\"",
        ),
        (
            vec![
                "complete",
                "0",
                "--status",
                "DONE",
                "--execution-owner",
                "ralph-execute",
                "--lease-id",
                "L2",
            ],
            "[ralph complete] LEASE_CONFLICT: lease conflict: session lease_id is \"L1\", got leaseId \"L2\"",
        ),
        (
            vec![
                "retry",
                "0",
                "--execution-owner",
                "ralph-execute",
                "--lease-id",
                "L1",
                "--owner-epoch",
                "2",
            ],
            "[ralph retry] LEASE_CONFLICT: lease conflict: session owner_epoch is 3, got older epoch 2",
        ),
        (
            vec![
                "complete",
                "0",
                "--status",
                "DONE",
                "--execution-owner",
                "ralph-execute",
                "--lease-id",
                "L1",
                "--expected-skill",
                "maestro-execute",
            ],
            "[ralph complete] EXPECTED_SKILL_MISMATCH: expected skill \"maestro-execute\" does not match active step skill \"maestro-plan\"",
        ),
        (
            vec![
                "complete",
                "0",
                "--status",
                "DONE",
                "--execution-owner",
                "ralph-execute",
                "--lease-id",
                "L1",
                "--expected-step-index",
                "1",
            ],
            "[ralph complete] E008: expected index 1 does not match target index 0",
        ),
    ];
    for (args, line) in refusals {
        let out = fx.ralph(&args);
        out.code(1);
        assert_eq!(out.stderr.lines().next().unwrap(), line, "{args:?}");
    }
    let out = fx.ralph(&["next"]);
    out.code(1);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "[ralph next] LEASE_CONFLICT: lease conflict: session owned by \"ralph-execute\", got \"undefined\""
    );
    assert_eq!(fx.raw(ID), before, "no refusal writes");
    fx.ralph(
        &[
            &[
                "complete",
                "0",
                "--status",
                "DONE",
                "--expected-skill",
                "maestro-plan",
                "--expected-step-index",
                "0",
            ][..],
            &lease[..],
        ]
        .concat(),
    )
    .code(0);
    // A newer epoch of the same owner goes on and is recorded.
    fx.ralph(&[
        "next",
        "--execution-owner",
        "ralph-execute",
        "--lease-id",
        "L1",
        "--owner-epoch",
        "4",
    ])
    .code(0);
    assert_eq!(fx.get(ID)["owner_epoch"], 4);
    // `release --force` frees the claim and the lease (the epoch stays, fencing old holders).
    fx.ralph(&["release", "--force"]).code(0);
    let doc = fx.get(ID);
    assert_eq!(doc["execution_owner"], Value::Null);
    assert_eq!(doc["lease_id"], Value::Null);
    assert_eq!(doc["owner_epoch"], 4);
    fx.ralph(&["next", "--owner-epoch", "3"]).code(1);
    fx.ralph(&["next"]).code(0);
}

#[test]
fn v05_ledger_add_and_query() {
    let fx = Fx::new();
    fx.put(ID, &v05(&fx, ID));
    fx.file("src/export.rs", "hello\n");
    let base = [
        "ledger",
        "--session",
        ID,
        "--authority",
        "execute-gate",
        "--dimension",
        "quality",
        "--subject",
        "src/export.rs",
        "--subject",
        "gone.md",
    ];
    fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        [base, extra].concat()
    }
    let with = |extra: &[&'static str]| with(&base, extra);
    let out = fx.ralph(&with(&["--action", "query"]));
    out.code(1);
    assert_eq!(
        out.stdout,
        "[ralph ledger] no matching ledger entry found\n"
    );
    let out = fx.ralph(&with(&["--action", "add", "--verdict", "pass"]));
    out.code(0);
    assert_eq!(
        out.stdout,
        "[ralph ledger] entry added successfully for subjects: src/export.rs, gone.md\n"
    );
    let entry = fx.get(ID)["verification_ledger"][0].clone();
    assert_eq!(
        keys(&entry),
        [
            "authority",
            "dimension",
            "subject_ids",
            "evidence_hashes",
            "scope_hash",
            "verdict",
            "confidence",
            "concerns",
            "risk_ceiling",
            "created_at"
        ]
    );
    assert_eq!(
        entry["evidence_hashes"],
        json!({
            // sha256("hello\n")
            "src/export.rs": "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
            "gone.md": "missing"
        })
    );
    assert_eq!(entry["confidence"], "medium");
    assert_eq!(entry["risk_ceiling"], "low");
    assert_eq!(entry["scope_hash"].as_str().unwrap().len(), 64);
    // Subjects in another order are the same entry.
    let swapped = [
        "ledger",
        "--session",
        ID,
        "--action",
        "query",
        "--authority",
        "execute-gate",
        "--dimension",
        "quality",
        "--subject",
        "gone.md",
        "--subject",
        "src/export.rs",
    ];
    let out = fx.ralph(&swapped);
    out.code(0);
    assert_eq!(
        out.stdout,
        "[ralph ledger] HIT: verdict=\"pass\" confidence=\"medium\"\n"
    );
    let out = fx.ralph(&with(&["--action", "query", "--risk-ceiling", "high"]));
    out.code(1);
    assert_eq!(
        out.stdout,
        "[ralph ledger] rejected: risk ceiling low is below requested risk high\n"
    );
    fx.file("src/export.rs", "hello!\n");
    let out = fx.ralph(&with(&["--action", "query"]));
    out.code(1);
    assert!(
        out.stdout.starts_with(
            "[ralph ledger] rejected: hash changed for subject \"src/export.rs\" (got \""
        ),
        "{}",
        out.stdout
    );
    // Adding again replaces the entry; a changed boundary contract invalidates it.
    fx.ralph(&with(&["--action", "add", "--verdict", "pass"]))
        .code(0);
    assert_eq!(
        fx.get(ID)["verification_ledger"].as_array().unwrap().len(),
        1
    );
    fx.ralph(&with(&["--action", "query"])).code(0);
    let mut doc = fx.get(ID);
    doc["boundary_contract"]["constraints"] = json!(["no new dependencies"]);
    fx.put(ID, &doc);
    let out = fx.ralph(&with(&["--action", "query"]));
    out.code(1);
    assert_eq!(
        out.stdout,
        "[ralph ledger] rejected: scope_hash changed (boundary contract modified)\n"
    );
    for (extra, why) in [
        (
            vec!["--action", "add", "--verdict", "fail"],
            "rejected: recorded verdict is \"fail\" (not pass/success)",
        ),
        (
            vec![
                "--action",
                "add",
                "--verdict",
                "pass",
                "--confidence",
                "low",
            ],
            "rejected: recorded confidence is low",
        ),
        (
            vec![
                "--action",
                "add",
                "--verdict",
                "DONE",
                "--concerns",
                "flaky",
            ],
            "rejected: entry contains concerns: \"flaky\"",
        ),
    ] {
        fx.ralph(&with(&extra)).code(0);
        let out = fx.ralph(&with(&["--action", "query"]));
        out.code(1);
        assert_eq!(out.stdout, format!("[ralph ledger] {why}\n"));
    }
    // maestro's argument checks.
    let out = fx.ralph(&["ledger", "--action", "query"]);
    out.code(2);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "[ralph ledger] LEDGER_USAGE: --session <id> is required"
    );
    fx.ralph(&["ledger", "--session", ID, "--action", "drop"])
        .code(2);
    fx.ralph(&[
        "ledger",
        "--session",
        ID,
        "--action",
        "add",
        "--authority",
        "a",
    ])
    .code(2);
    let out = fx.ralph(&[
        "ledger",
        "--session",
        ID,
        "--action",
        "add",
        "--authority",
        "a",
        "--dimension",
        "d",
    ]);
    out.code(1);
    assert!(out.stderr.contains("--verdict is required for add action"));
}

#[test]
fn v05_skills_lists_the_agent_and_agy_platforms() {
    let fx = Fx::new();
    fx.file(
        ".agy/skills/maestro-plan/SKILL.md",
        "---\nname: maestro-plan\ndescription: plan (agy)\n---\nbody\n",
    );
    let global = fx.home.join(".agents/skills/maestro-verify");
    std::fs::create_dir_all(&global).unwrap();
    std::fs::write(
        global.join("SKILL.md"),
        "---\nname: maestro-verify\n---\nbody\n",
    )
    .unwrap();
    let out = fx.ralph(&["skills", "--platform", "agent", "--json"]);
    out.code(0);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["platform"], "agent");
    assert_eq!(lines[0]["scope"], "global");
    assert_eq!(lines[0]["name"], "maestro-verify");
    let out = fx.ralph(&["skills", "--platform", "agy", "--quiet"]);
    out.code(0);
    assert!(
        out.stdout
            .starts_with("agy      skill    project  maestro-plan"),
        "{}",
        out.stdout
    );
    // Unfiltered, all four platforms are listed.
    let all = fx.ralph(&["skills", "--json"]).stdout;
    for p in ["claude", "codex", "agent", "agy"] {
        if p == "codex" {
            continue; // the sample HOME has no codex skills
        }
        assert!(all.contains(&format!("\"platform\":\"{p}\"")), "{p}");
    }
}

#[test]
fn v05_the_prompt_of_a_protocol_2_session_starts_with_the_session_anchor() {
    let fx = Fx::new();
    let mut doc = v05(&fx, ID);
    step_mut(&mut doc, 0).insert("status".into(), json!("completed"));
    step_mut(&mut doc, 0).insert("completion_confirmed".into(), json!(true));
    step_mut(&mut doc, 0).insert("completion_summary".into(), json!("Planned the export"));
    step_mut(&mut doc, 0).insert("completion_caveats".into(), json!("no streaming"));
    step_mut(&mut doc, 0).insert("completion_deferred".into(), json!(["xlsx", "json"]));
    fx.put(ID, &doc);
    let out = fx
        .cmd(&["next"])
        .env("BATON_RALPH_CLI", "maestro ralph")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let prompt = String::from_utf8_lossy(&out.stdout).into_owned();
    let anchor = format!(
        "<session_anchor>
## Session Anchor — {ID}

**Intent**: add CSV export

**Scope**: unknown | Phase 1 | Milestone: M1

**Boundary Contract**:
- In scope: csv export
- Out of scope: xlsx
- Done when: tests pass

**Execution Progress**:
- [0] maestro-plan (plan): Planned the export
  ⚠️ no streaming
- Progress: 1 done, 2 pending

**Goals Overview**:
- [○] G1: CSV export works — done_when: export test passes

**Current Goal** (G1):
- Goal: CSV export works
- Boundary: export only
- Done when: export test passes

**Execution Criteria**: backward compatible

**⚠️ Accumulated Signals**:
- Caveats: no streaming
- Deferred work: xlsx; json
- **Before proceeding, verify these signals do not conflict with your current task.**

<!-- session_anchor: read-only grounding. Honor Intent + Boundary Contract before acting.
     If your work would fall outside in_scope (or hit out_of_scope), stop and report via
     `maestro ralph complete <N> --session {ID} --status BLOCKED --reason \"out_of_scope: ...\"` instead of proceeding.
     If Accumulated Signals suggest prior work conflicts with your task, report via
     `maestro ralph complete <N> --session {ID} --status BLOCKED --reason \"drift_conflict: ...\"` instead of proceeding. -->
</session_anchor>

<purpose>
"
    );
    assert!(prompt.starts_with(&anchor), "{prompt}");
    let trailer = format!(
        "
<!-- maestro ralph: step [1/3] skill=maestro-execute args=\"1\" session={ID} -->
<!-- On finish, run exactly one of:
       maestro ralph complete 1 --session {ID} --status DONE --summary \"...\" [--evidence <path>] [--decisions \"...\"] [--caveats \"...\"] [--deferred \"...\"]
       maestro ralph complete 1 --session {ID} --status DONE_WITH_CONCERNS --summary \"...\" --concerns \"...\"
       maestro ralph retry 1 --session {ID}
       maestro ralph complete 1 --session {ID} --status BLOCKED --reason \"<external blocker>\"
     --summary is REQUIRED for DONE/DONE_WITH_CONCERNS (verb-led, ≤100 chars, core outcome). -->
"
    );
    assert!(prompt.ends_with(&trailer), "{prompt}");
    // A v0.4.18 session keeps v0.4.18's prompt: no anchor.
    let old = "ralph-20260101-000000";
    fx.put(old, &simple(&fx, old));
    let out = fx.ralph(&["next", "--session", old]);
    assert!(out.stdout.starts_with("<purpose>"));
}
