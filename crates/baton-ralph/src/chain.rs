//! Building steps: the lifecycle stage table of seed 003 (A_BUILD_STEPS), the fix-loop
//! templates (Appendix: Fix-Loop Templates), new step objects in the schema's field order, and
//! command-file resolution (build rule 9: project overrides global; a miss is E006).

use super::context::Context;
use super::error::{RalphError, Result};
use super::session::Session;
use super::skills;
use serde_json::{Map, Value, json};

/// One step to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Exec {
        skill: String,
        args: String,
        stage: String,
        scope: Option<String>,
        goal_ref: Option<String>,
    },
    Gate {
        gate: String,
        stage: String,
        retry: u64,
    },
}

fn exec(skill: &str, args: &str, stage: &str) -> Item {
    Item::Exec {
        skill: skill.into(),
        args: args.into(),
        stage: stage.into(),
        scope: None,
        goal_ref: None,
    }
}

fn gate(gate: &str, stage: &str, retry: u64) -> Item {
    Item::Gate {
        gate: gate.into(),
        stage: stage.into(),
        retry,
    }
}

/// The lifecycle stages, in canonical order.
pub const STAGES: [&str; 16] = [
    "brainstorm",
    "blueprint",
    "init",
    "analyze-macro",
    "roadmap",
    "analyze",
    "plan",
    "execute",
    "verify",
    "business-test",
    "review",
    "test-gen",
    "test",
    "milestone-audit",
    "goal-audit",
    "milestone-complete",
];

/// How `new` fills the args column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanningMode {
    Independent,
    Unified,
}

/// The steps of one stage: its command (column by planning mode) and the decision node after
/// it. Placeholders (`{phase}`, `{intent}`, …) are kept, as build rule 8 says; the caller
/// resolves them at tick time.
pub fn stage_items(stage: &str, mode: PlanningMode, quick: bool) -> Option<Vec<Item>> {
    let phase = |cmd: &str| match mode {
        PlanningMode::Independent => format!("{cmd} {{phase}}"),
        PlanningMode::Unified => cmd.to_string(),
    };
    let (cmd, after): (String, Option<&str>) = match stage {
        "brainstorm" => ("maestro-brainstorm \"{intent}\"".into(), None),
        "blueprint" => ("maestro-blueprint \"{intent}\"".into(), None),
        "init" => ("maestro-init".into(), None),
        "analyze-macro" => (
            "maestro-analyze \"{intent}\"".into(),
            Some("post-analyze-scope"),
        ),
        "roadmap" => (
            "maestro-roadmap --from analyze:{analyze_macro_id}".into(),
            None,
        ),
        "analyze" => (phase("maestro-analyze"), None),
        "plan" => (phase("maestro-plan"), None),
        "execute" => (phase("maestro-execute"), None),
        "verify" => (phase("maestro-verify"), Some("post-verify")),
        "business-test" => (phase("quality-auto-test"), Some("post-business-test")),
        "review" => {
            let mut c = phase("quality-review");
            if quick {
                c.push_str(" --tier quick");
            }
            (c, Some("post-review"))
        }
        "test-gen" => (phase("quality-auto-test"), None),
        "test" => (phase("quality-test"), Some("post-test")),
        "milestone-audit" => ("maestro-milestone-audit".into(), None),
        "goal-audit" => return Some(vec![gate("post-goal-audit", "goal-audit", 0)]),
        "milestone-complete" => ("maestro-milestone-complete".into(), Some("post-milestone")),
        _ => return None,
    };
    let (skill, args) = cmd.split_once(' ').unwrap_or((cmd.as_str(), ""));
    let mut item = exec(skill, args, stage);
    if stage == "plan"
        && let Item::Exec { scope, .. } = &mut item
    {
        *scope = Some(match mode {
            PlanningMode::Independent => "phase".into(),
            PlanningMode::Unified => "milestone".into(),
        });
    }
    let mut items = vec![item];
    if let Some(g) = after {
        items.push(gate(g, stage, 0));
    }
    Some(items)
}

/// The fix-loop templates `insert --template` and `decide --verdict fix` use.
pub const TEMPLATES: [&str; 5] = [
    "post-verify",
    "post-business-test",
    "post-review",
    "post-test",
    "post-goal-audit",
];

/// `{gap_summary}` filled with the gaps (kept as a placeholder when none is given), quoted
/// safely for an args string.
fn gap_text(gaps: &[String]) -> String {
    if gaps.is_empty() {
        "{gap_summary}".into()
    } else {
        gaps.join("; ").replace('\\', "\\\\").replace('"', "\\\"")
    }
}

/// The steps of a fix-loop template; `retry_next` is the retry count of its closing gate.
pub fn template_items(name: &str, gaps: &[String], retry_next: u64) -> Option<Vec<Item>> {
    let g = gap_text(gaps);
    let plan = || exec("maestro-plan", "--gaps {phase}", "plan");
    let execute = || exec("maestro-execute", "{phase}", "execute");
    let verify = || exec("maestro-verify", "{phase}", "verify");
    let items = match name {
        "post-verify" => vec![
            exec("quality-debug", &format!("\"{g}\""), "debug"),
            plan(),
            execute(),
            verify(),
            gate("post-verify", "verify", retry_next),
        ],
        "post-business-test" => vec![
            exec(
                "quality-debug",
                &format!("--from-business-test \"{g}\""),
                "debug",
            ),
            plan(),
            execute(),
            verify(),
            gate("post-verify", "verify", 0),
            exec("quality-auto-test", "{phase}", "business-test"),
            gate("post-business-test", "business-test", retry_next),
        ],
        "post-review" => vec![
            exec("quality-debug", &format!("\"{g}\""), "debug"),
            plan(),
            execute(),
            exec("quality-review", "{phase}", "review"),
            gate("post-review", "review", retry_next),
        ],
        "post-test" => vec![
            exec("quality-debug", &format!("--from-uat \"{g}\""), "debug"),
            plan(),
            execute(),
            verify(),
            gate("post-verify", "verify", 0),
            exec("quality-auto-test", "{phase}", "business-test"),
            gate("post-business-test", "business-test", 0),
            exec("quality-review", "{phase}", "review"),
            gate("post-review", "review", 0),
            exec("quality-auto-test", "{phase}", "test-gen"),
            exec("quality-test", "{phase}", "test"),
            gate("post-test", "test", retry_next),
        ],
        "post-goal-audit" => {
            let mut items = Vec::new();
            let groups: Vec<Option<&String>> = if gaps.is_empty() {
                vec![None]
            } else {
                gaps.iter().map(Some).collect()
            };
            for gap in groups {
                let goal_ref = gap.and_then(|g| goal_id(g));
                let text = gap.map_or("{gap}".to_string(), |g| gap_text(std::slice::from_ref(g)));
                for mut item in [
                    exec(
                        "maestro-plan",
                        &format!("--gaps {{phase}} \"{text}\""),
                        "plan",
                    ),
                    execute(),
                    verify(),
                ] {
                    if let Item::Exec { goal_ref: r, .. } = &mut item {
                        *r = goal_ref.clone();
                    }
                    items.push(item);
                }
            }
            items.push(gate("post-goal-audit", "goal-audit", retry_next));
            items
        }
        _ => return None,
    };
    Some(items)
}

/// A_APPLY_ESCALATE: debug, then a gate that always stops for a person.
pub fn escalate_items(gaps: &[String]) -> Vec<Item> {
    vec![
        exec("quality-debug", &format!("\"{}\"", gap_text(gaps)), "debug"),
        gate("post-debug-escalate", "debug", 0),
    ]
}

/// The number of a sub-goal id (`G7` → 7); ids that are not `G<n>` sort last.
pub fn goal_number(id: &str) -> u64 {
    id.strip_prefix('G')
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

/// Build rule 7 on a session's `task_decomposition`: the sub-goal whose `lifecycle` names
/// `stage`, the smallest number first (`G2` before `G10`).
pub fn goal_ref_in(goals: Option<&Value>, stage: &str) -> Option<String> {
    goals?
        .as_array()?
        .iter()
        .filter(|g| {
            g.get("lifecycle")
                .and_then(Value::as_array)
                .is_some_and(|l| l.iter().any(|s| s.as_str() == Some(stage)))
        })
        .filter_map(|g| g.get("id").and_then(Value::as_str))
        .min_by_key(|id| goal_number(id))
        .map(str::to_owned)
}

/// `G2` of a gap written `G2: text`.
fn goal_id(gap: &str) -> Option<String> {
    let (id, _) = gap.split_once(':')?;
    let id = id.trim();
    let ok = id.len() > 1 && id.starts_with('G') && id[1..].bytes().all(|b| b.is_ascii_digit());
    ok.then(|| id.to_string())
}

/// A new step object, fields in the order of the schema appendix. `command_scope` and
/// `command_path` are filled by [`resolve_commands`].
pub fn step_value(item: &Item, index: usize, milestone: &Value) -> Value {
    let mut s = Map::new();
    let (skill, args, stage, scope, decision, retry, goal_ref) = match item {
        Item::Exec {
            skill,
            args,
            stage,
            scope,
            goal_ref,
        } => (
            json!(skill),
            json!(args),
            stage,
            json!(scope),
            Value::Null,
            0,
            json!(goal_ref),
        ),
        Item::Gate { gate, stage, retry } => (
            json!(""),
            json!(""),
            stage,
            Value::Null,
            json!(gate),
            *retry,
            Value::Null,
        ),
    };
    let has_phase = args.as_str().is_some_and(|a| a.contains("{phase}"));
    s.insert("index".into(), json!(index));
    s.insert("skill".into(), skill);
    s.insert("args".into(), args);
    s.insert("stage".into(), json!(stage));
    s.insert("scope".into(), scope);
    s.insert("decision".into(), decision);
    s.insert("retry_count".into(), json!(retry));
    s.insert("max_retries".into(), json!(2));
    s.insert("command_scope".into(), Value::Null);
    s.insert("command_path".into(), Value::Null);
    s.insert(
        "milestone_id".into(),
        if has_phase {
            milestone.clone()
        } else {
            Value::Null
        },
    );
    s.insert("source_artifact_ref".into(), Value::Null);
    s.insert("status".into(), json!("pending"));
    s.insert("goal_ref".into(), goal_ref);
    s.insert("completion_confirmed".into(), json!(false));
    s.insert("completion_status".into(), Value::Null);
    s.insert("completion_evidence".into(), Value::Null);
    s.insert("completed_at".into(), Value::Null);
    s.insert("deferred_reads".into(), json!([]));
    s.insert("load".into(), Value::Null);
    Value::Object(s)
}

/// Sets `command_scope`/`command_path` of every execution step from the skills found for
/// `platform`. Returns the skills that were not found (E006 at build time).
pub fn resolve_commands(ctx: &Context, platform: &str, steps: &mut [Value]) -> Vec<String> {
    let entries = skills::scan(ctx, Some(platform));
    let mut missing = Vec::new();
    for step in steps.iter_mut().filter_map(Value::as_object_mut) {
        let skill = step.get("skill").and_then(Value::as_str).unwrap_or("");
        let is_gate = step
            .get("decision")
            .and_then(Value::as_str)
            .is_some_and(|d| !d.is_empty());
        if is_gate || skill.is_empty() {
            continue;
        }
        match skills::find(&entries, skill) {
            Some(e) => {
                step.insert("command_scope".into(), json!(e.scope));
                step.insert("command_path".into(), json!(e.path.display().to_string()));
            }
            None => {
                if !missing.iter().any(|m| m == skill) {
                    missing.push(skill.to_string());
                }
                step.insert("command_scope".into(), json!("missing"));
                step.insert("command_path".into(), Value::Null);
            }
        }
    }
    missing
}

/// The platform a session's commands resolve on (`claude` unless it names another one).
pub fn platform_of(session: &Session) -> &'static str {
    match session.str("platform") {
        Some("codex") => "codex",
        Some("agent") => "agent",
        Some("agy") => "agy",
        _ => "claude",
    }
}

/// Inserts `items` after step `after`, resolving their command files first (nothing changes
/// when one is missing), and renumbers. Build rule 14: the inserted steps get rules 7–13 too,
/// so an execution step without a goal takes the sub-goal whose lifecycle names its stage.
/// Returns how many steps were inserted.
pub fn insert_after(
    ctx: &Context,
    session: &mut Session,
    after: usize,
    items: &[Item],
) -> Result<usize> {
    let goals = session.doc.get("task_decomposition");
    let items: Vec<Item> = items
        .iter()
        .cloned()
        .map(|mut item| {
            if let Item::Exec {
                stage, goal_ref, ..
            } = &mut item
                && goal_ref.is_none()
            {
                *goal_ref = goal_ref_in(goals, stage);
            }
            item
        })
        .collect();
    let milestone = session.doc.get("milestone").cloned().unwrap_or(Value::Null);
    let milestone = if milestone.as_str() == Some("") {
        Value::Null
    } else {
        milestone
    };
    // The loop works on the phase of the step it fixes: in an independently planned
    // milestone of several phases that is not always the session's `phase` (its first), which
    // `{phase}` would otherwise be filled with when the step is claimed.
    let phase = phase_fixed_after(session, after);
    let new_steps: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(k, item)| {
            let mut step = step_value(item, after + 1 + k, &milestone);
            if let Some(p) = &phase
                && let Some(args) = step.get("args").and_then(Value::as_str)
                && args.contains("{phase}")
            {
                step["args"] = json!(args.replace("{phase}", p));
            }
            step
        })
        .collect();
    insert_steps_after(ctx, session, after, new_steps)
}

/// The phase a fix loop inserted after step `after` works on: the phase number the args of
/// the step it fixes begin with (`maestro-verify 2`, filled when the milestone's chain was
/// built or the step claimed). The step fixed is, for a gate, the nearest execution step
/// before it of the gate's stage; otherwise step `after` itself. `None` when that step names
/// no phase (a unified milestone's steps): `{phase}` is filled from the session then.
fn phase_fixed_after(session: &Session, after: usize) -> Option<String> {
    let at = session.step(after)?;
    let fixed = match at.decision() {
        Some(_) => session
            .all_steps()
            .take(after)
            .filter(|st| st.decision().is_none() && st.stage() == at.stage())
            .last()?,
        None => at,
    };
    let first = fixed.args().split_whitespace().next()?;
    let numeric = first.starts_with(|c: char| c.is_ascii_digit())
        && first.chars().all(|c| c.is_ascii_digit() || c == '.');
    numeric.then(|| first.to_string())
}

/// Inserts ready step objects after step `after`: their command files resolved first on the
/// session's platform (E006, nothing changes, when one is missing), then renumbered with the
/// rest. Returns how many steps were inserted.
pub fn insert_steps_after(
    ctx: &Context,
    session: &mut Session,
    after: usize,
    mut new_steps: Vec<Value>,
) -> Result<usize> {
    let missing = resolve_commands(ctx, platform_of(session), &mut new_steps);
    if !missing.is_empty() {
        return Err(RalphError::SkillsMissing(missing));
    }
    let count = new_steps.len();
    let steps = session.steps_mut();
    let at = (after + 1).min(steps.len());
    steps.splice(at..at, new_steps);
    session.reindex(after, count);
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_have_their_gates() {
        let items = stage_items("verify", PlanningMode::Independent, false).unwrap();
        assert_eq!(items[0], exec("maestro-verify", "{phase}", "verify"));
        assert_eq!(items[1], gate("post-verify", "verify", 0));
        let items = stage_items("review", PlanningMode::Unified, true).unwrap();
        assert_eq!(items[0], exec("quality-review", "--tier quick", "review"));
        assert!(stage_items("deploy", PlanningMode::Unified, false).is_none());
    }

    #[test]
    fn goal_refs_take_the_smallest_number() {
        let goals = json!([
            {"id": "G10", "lifecycle": ["execute"]},
            {"id": "G2", "lifecycle": ["execute", "verify"]},
            {"id": "G3", "lifecycle": "verify"},
        ]);
        assert_eq!(goal_ref_in(Some(&goals), "execute").as_deref(), Some("G2"));
        assert_eq!(goal_ref_in(Some(&goals), "verify").as_deref(), Some("G2"));
        assert_eq!(goal_ref_in(Some(&goals), "plan"), None);
        assert_eq!(goal_ref_in(None, "plan"), None);
        assert_eq!(goal_number("G10"), 10);
        assert_eq!(goal_number("G"), u64::MAX);
        assert_eq!(goal_number("X1"), u64::MAX);
    }

    /// An independently planned milestone of phases 1 and 2: the session's `phase` is the
    /// first (1); the fix loop after phase 2's verify gate works on phase 2.
    #[test]
    fn a_fix_loop_works_on_the_phase_of_the_step_it_fixes() {
        let tmp = tempfile::tempdir().unwrap();
        let commands = tmp.path().join(".claude/commands");
        std::fs::create_dir_all(&commands).unwrap();
        for skill in [
            "quality-debug",
            "maestro-plan",
            "maestro-execute",
            "maestro-verify",
        ] {
            std::fs::write(commands.join(format!("{skill}.md")), "# x\n").unwrap();
        }
        let ctx = crate::testing::context(tmp.path());
        let m = json!("M2");
        let done = |item: Item, i: usize, args: &str| {
            let mut st = step_value(&item, i, &m);
            if !args.is_empty() {
                st["args"] = json!(args);
            }
            st["status"] = json!("completed");
            st
        };
        let mut pending_gate = step_value(&gate("post-verify", "verify", 0), 3, &m);
        pending_gate["status"] = json!("running");
        let mut doc = Map::new();
        doc.insert("phase".into(), json!(1));
        doc.insert("milestone".into(), m.clone());
        doc.insert(
            "steps".into(),
            json!([
                done(exec("maestro-verify", "{phase}", "verify"), 0, "1"),
                done(gate("post-verify", "verify", 0), 1, ""),
                done(exec("maestro-verify", "{phase}", "verify"), 2, "2"),
                pending_gate,
            ]),
        );
        let mut s = Session {
            id: "s".into(),
            dir: tmp.path().to_path_buf(),
            doc,
        };
        let items = template_items("post-verify", &["login fails".into()], 1).unwrap();
        assert_eq!(insert_after(&ctx, &mut s, 3, &items).unwrap(), 5);
        let args: Vec<&str> = s.all_steps().skip(4).map(|st| st.args()).collect();
        assert_eq!(args, ["\"login fails\"", "--gaps 2", "2", "2", ""]);
        // After phase 1's gate, the loop works on phase 1.
        let items = template_items("post-verify", &[], 1).unwrap();
        insert_after(&ctx, &mut s, 1, &items).unwrap();
        assert_eq!(s.step(3).unwrap().args(), "--gaps 1");
        assert_eq!(s.step(4).unwrap().args(), "1");
    }

    #[test]
    fn templates_close_with_one_gate() {
        let items = template_items("post-test", &["flaky login".into()], 2).unwrap();
        assert_eq!(items.len(), 12);
        assert_eq!(
            items[0],
            exec("quality-debug", "--from-uat \"flaky login\"", "debug")
        );
        assert_eq!(items[11], gate("post-test", "test", 2));
        let goal = template_items(
            "post-goal-audit",
            &["G2: no export".into(), "G3: slow".into()],
            1,
        )
        .unwrap();
        assert_eq!(goal.len(), 7);
        assert!(
            matches!(&goal[0], Item::Exec { goal_ref: Some(g), args, .. } if g == "G2" && args == "--gaps {phase} \"G2: no export\"")
        );
        assert_eq!(goal[6], gate("post-goal-audit", "goal-audit", 1));
    }
}
