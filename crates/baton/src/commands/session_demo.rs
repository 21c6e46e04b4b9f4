//! `baton demo session`: a lifecycle session on a copy of the csvsum sample, offline. The
//! session is built from the intent (phase 1 of milestone M1, quick quality), then runs
//! analyze → plan → execute → verify; the recorded model forgot a case, so the post-verify gate
//! says `fix` and its fix loop (debug, plan --gaps, execute, verify) is inserted; the second
//! verify passes, review passes, the goal audit finds the sub-goal met and the milestone
//! completes. Everything is inside the binary: the project, the bundled lifecycle skills and
//! one trace per model conversation (recorded against the played model of
//! `crates/baton-lifecycle/tests/support/session_player.rs`).

use super::demo::{clear_previous_demo, embed, mark_all_files, write_files};
use crate::args::demo::DemoSessionArgs;
use crate::exit;
use crate::failure::Failure;
use crate::signals::{self, shell_word};
use baton_engine::driver::ABORTED;
use baton_lifecycle::ralph::Context;
use baton_lifecycle::ralph::discovery::{self, Pick};
use baton_lifecycle::ralph::session::Session;
use baton_lifecycle::session::infer::QualityMode;
use baton_lifecycle::session::run::{RunSettings, SessionEnd, Tick, run as run_session};
use baton_lifecycle::session::start::{self, StartOptions, StartOutcome};
use baton_lifecycle::session::step_run::ModelSource;
use baton_lifecycle::session::tick::StepEnd;
use baton_llm::{ReplayModel, Trace};
use baton_store::Store;
use serde_json::{Value, json};
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// What the session is asked (the recording was made with the same words).
pub const INTENT: &str = "phase 1: add a --header flag that skips the first line";
/// The decomposition call's trace, beside the session's step and gate traces.
const START_TRACE: &str = "start.trace.json";

const PROJECT: &[(&str, &[u8])] = embed!(
    "../../../../examples/projects/csvsum/";
    "README.md",
    "csvsum.sh",
    "test.sh",
    ".workflow/project.md",
    ".workflow/roadmap.md",
    ".workflow/state.json",
);

const TRACES: &[(&str, &[u8])] = embed!(
    "../../../../examples/traces/session-demo/";
    "start.trace.json",
    "step-0.1.trace.json",
    "step-1.1.trace.json",
    "step-2.1.trace.json",
    "step-3.1.trace.json",
    "gate-4.0.trace.json",
    "step-5.1.trace.json",
    "step-6.1.trace.json",
    "step-7.1.trace.json",
    "step-8.1.trace.json",
    "gate-9.1.trace.json",
    "step-10.1.trace.json",
    "gate-11.0.trace.json",
    "step-12.1.trace.json",
    "gate-13.0.trace.json",
    "step-14.1.trace.json",
);

/// The session context of the demo: the copy, and only the bundled skills (a command of the
/// same name in the user's `~/.claude/commands` would change the prompts the recording saw).
fn context(dir: &Path, store: &Store) -> Result<Context, Failure> {
    let mut ctx = Context::from_env(dir, "baton ralph");
    ctx.home = None;
    ctx.maestro_home = None;
    // The owner `baton session continue` claims with: a demo stopped with Ctrl-C goes on
    // from the step it held.
    ctx.owner = super::session::owner();
    ctx.with_bundled_skills(store.home())
        .map_err(|e| Failure::new(e.code(), e.to_string(), exit::FAILURE))
}

fn session(ctx: &Context) -> Option<Session> {
    discovery::find(ctx, None, Pick::Any)
        .and_then(|l| l.into_session())
        .ok()
}

/// One line per tick, read back from status.json: what was recorded, not what was said.
fn tick_line(s: Option<&Session>, t: &Tick) -> String {
    let head = |index: usize| {
        let total = s.map_or(0, Session::len);
        let label = s
            .and_then(|s| s.step(index))
            .map(|st| match st.decision() {
                Some(_) => st.label(),
                None => format!("{} {}", st.label(), st.args()).trim().to_string(),
            })
            .unwrap_or_default();
        format!("  [{index}/{total}] {label}")
    };
    match t {
        Tick::Step { index, end } => match end {
            StepEnd::Recorded(c) => format!("{} · {}", head(*index), c.status.as_str()),
            StepEnd::Waiting { .. } => format!("{} · waits for an answer", head(*index)),
            StepEnd::Interrupted { code, .. } => format!("{} · stopped ({code})", head(*index)),
        },
        Tick::Gate { index, .. } => {
            let step = s.and_then(|s| s.step(*index));
            let verdict = step.and_then(|st| st.str("verdict")).unwrap_or("settled");
            let retry = step.map_or(0, |st| st.retry_count());
            format!("{} → {verdict} (retry {retry})", head(*index))
        }
        Tick::Paused { index } => format!("{} → paused for a person", head(*index)),
        Tick::Completed => "  session completed".into(),
        Tick::Empty => "  nothing to run".into(),
    }
}

/// The finished session for `--json`: its id, status, steps and decisions.
fn summary(ctx: &Context, end: &SessionEnd) -> Value {
    let s = session(ctx);
    let steps: Vec<Value> = s
        .as_ref()
        .map(|s| {
            s.all_steps()
                .map(|st| {
                    json!({
                        "index": st.index(),
                        "skill": st.skill(),
                        "args": st.args(),
                        "decision": st.decision(),
                        "status": st.status(),
                        "retry_count": st.retry_count(),
                        "verdict": st.str("verdict"),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "ok": *end == SessionEnd::Completed,
        "session_id": s.as_ref().map(|s| s.id.clone()),
        "status": s.as_ref().map(|s| s.status().to_string()),
        "status_json": s.as_ref().map(|s| s.status_path().display().to_string()),
        "steps": steps,
    })
}

pub fn run(args: DemoSessionArgs) -> anyhow::Result<u8> {
    let dir = &args.dir;
    if let Err(f) = clear_previous_demo(dir, "baton demo session") {
        return Ok(f.report(args.json));
    }
    if let Err(e) = write_files(dir, PROJECT).and_then(|()| mark_all_files(dir)) {
        return Ok(super::demo::dir_unusable(dir, &e).report(args.json));
    }
    let store = Store::open_default()?;
    // The recorded model lives under baton's home, not in a temporary directory: a demo
    // stopped with Ctrl-C is continued with the same traces.
    let traces = match super::demo::bundled_traces(&store, "session-demo-traces", TRACES) {
        Ok(t) => t,
        Err(f) => return Ok(f.report(args.json)),
    };
    let ctx = match context(dir, &store) {
        Ok(c) => c,
        Err(f) => return Ok(f.report(args.json)),
    };
    let shown_dir = shell_word(&dir.display().to_string());
    let resume = format!(
        "baton session continue --project {shown_dir} --replay {}",
        shell_word(&traces.display().to_string())
    );
    let runtime = crate::runtime::runtime()?;
    let cancel = CancellationToken::new();
    let _signals = signals::watch_with(&runtime, cancel.clone(), super::session::SIGNAL_HINTS);
    // Until the session exists there is nothing to continue: the demo starts again.
    signals::set_next(signals::Next {
        resume: format!("baton demo session --dir {shown_dir}"),
        answer: None,
    });
    if !args.json {
        eprintln!(
            "baton demo session: \"{INTENT}\" on the csvsum sample in {} (replaying recorded \
             answers, offline)",
            dir.display()
        );
    }
    let result = runtime.block_on(async {
        let start_model = ReplayModel::new(Trace::parse(&String::from_utf8_lossy(
            TRACES
                .iter()
                .find(|(n, _)| *n == START_TRACE)
                .map_or(&[][..], |(_, b)| *b),
        ))?);
        let opts = StartOptions {
            intent: INTENT.into(),
            quality: Some(QualityMode::Quick),
            auto: true,
            ..StartOptions::default()
        };
        let id = match start::start(&ctx, &opts, &start_model, &cancel).await {
            Ok(StartOutcome::Created(c)) => {
                if !args.json {
                    eprintln!("Session {} ({} steps):", c.session_id, c.steps.len());
                }
                c.session_id
            }
            Ok(other) => anyhow::bail!("the demo session was not created: {other:?}"),
            Err(e) => anyhow::bail!("{}: {e}", e.code()),
        };
        // One driver per session, as `baton session continue` takes it: `session status`
        // tells a live demo from a stopped one by this lock.
        let session_dir = session(&ctx).map(|s| s.dir);
        let _lock = match &session_dir {
            Some(d) => Some(
                baton_store::driver_lock::acquire(d, &id, "baton demo session")
                    .map_err(|e| anyhow::anyhow!("{}: {e}", e.code()))?,
            ),
            None => None,
        };
        signals::set_next(signals::Next {
            resume: resume.clone(),
            answer: None,
        });
        let mut after = |t: &Tick| {
            if !args.json {
                eprintln!("{}", tick_line(session(&ctx).as_ref(), t));
            }
        };
        let owner = super::session::owner();
        let mut settings = RunSettings::new(&owner, &store, ModelSource::Replay(&traces));
        settings.cancel = cancel.clone();
        settings.after_tick = Some(&mut after);
        run_session(&ctx, None, settings)
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e}", e.code()))
    });
    mark_all_files(dir)?;
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            return Ok(Failure::new("DEMO_FAILED", e.to_string(), exit::FAILURE).report(args.json));
        }
    };
    let code = match &report.end {
        SessionEnd::Completed => exit::OK,
        SessionEnd::Interrupted { code, .. } if *code == ABORTED => exit::STOPPED,
        _ => exit::FAILURE,
    };
    if code == exit::STOPPED && !args.json {
        eprintln!(
            "{} continue with `{resume}`",
            crate::ui::color::err(crate::ui::Paint::Warn, "stopped;")
        );
        return Ok(code);
    }
    if args.json {
        crate::ui::print_json(&summary(&ctx, &report.end))?;
        return Ok(code);
    }
    if let Some(s) = session(&ctx) {
        outln!("\nSession {}: {}", s.id, s.status());
        outln!("  status.json: {}", s.status_path().display());
        outln!(
            "  decisions:   {}",
            s.dir.join("decisions.ndjson").display()
        );
    }
    outln!(
        "The phase's files: {}",
        dir.join(".workflow/scratch/P1").display()
    );
    outln!(
        "The board again: baton session status --project {}",
        dir.display()
    );
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::super::demo::tests::{listed, names};
    use super::*;

    /// A trace recorded again under another name, or a file added to the sample, is compiled
    /// in too (the replay would miss it otherwise).
    #[test]
    fn the_embedded_files_are_the_directories() {
        assert_eq!(names(TRACES), listed("examples/traces/session-demo"));
        assert_eq!(names(PROJECT), listed("examples/projects/csvsum"));
    }
}
