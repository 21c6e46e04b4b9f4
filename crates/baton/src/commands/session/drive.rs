//! The loop as a person sees it: ticks with one progress line each, a step's question asked at
//! the terminal (or exit 10), a pause for a person decided at the terminal (or exit 10), and the
//! end of the command as an [`Outcome`].

use super::progress::TickLines;
use super::report::{Ended, Outcome, Waiting, review_line};
use super::setup::Setup;
use super::{errors, prompt, text};
use crate::failure::Failure;
use crate::progress::Progress;
use baton_engine::EngineEvent;
use baton_engine::driver::ABORTED;
use baton_lifecycle::ralph::discovery::{self, Pick};
use baton_lifecycle::ralph::session::Session;
use baton_lifecycle::session::intervene::{self, Choice, Pause};
use baton_lifecycle::session::run::{self, RunSettings, SessionEnd, SessionReport, Spent, Tick};
use tokio_util::sync::CancellationToken;

/// What the next invocation of the loop does first.
enum Next {
    Tick,
    Answer(String),
}

/// The session as it is now (for the final report); `None` if it cannot be read.
pub fn load(setup: &Setup, id: &str) -> Option<Session> {
    discovery::find(&setup.ctx, Some(id), Pick::Any)
        .and_then(|l| l.into_session())
        .ok()
}

/// Whether a failed step is asked about: seed 003 lets an auto-mode (`-y`) session pause on a
/// failed step without asking; an interactive-mode session offers retry, skip or abort. A
/// gate's verdict only waits in a session without `-y`, and is always asked about.
fn asks_about(s: &Session, pause: &Pause) -> bool {
    match pause {
        Pause::FailedStep { .. } => s.doc.get("auto_mode").and_then(|v| v.as_bool()) != Some(true),
        Pause::Escalation { .. } | Pause::GateReview { .. } | Pause::Question { .. } => true,
        Pause::ByHand => false,
    }
}

/// A paused session: asked at the terminal and decided (`Ok(None)`: tick on), or the outcome
/// the command ends with.
pub fn settle_pause(
    setup: &Setup,
    bar: &Progress,
    s: &Session,
) -> Result<Option<Outcome>, Failure> {
    let Some(pause) = intervene::why_paused(s) else {
        return Ok(match s.status() {
            // Resumed meanwhile (`baton ralph resume`): tick on.
            "running" => None,
            "failed" => Some(Outcome::Abandoned),
            other => Some(Outcome::Failed {
                code: "SESSION_NOT_ACTIVE".into(),
                message: format!("session {} is \"{other}\"", s.id),
            }),
        });
    };
    if !asks_about(s, &pause) {
        return Ok(Some(Outcome::Paused(pause)));
    }
    if !setup.interactive {
        return Ok(Some(Outcome::Waiting(Waiting::Paused(pause))));
    }
    let title = match &pause {
        Pause::FailedStep {
            index,
            label,
            reason,
        } => format!(
            "step {index} ({}) failed{}. What now?",
            text::line(label, 200),
            reason
                .as_deref()
                .map(|r| format!(": {}", text::line(r, 300)))
                .unwrap_or_default()
        ),
        Pause::Escalation { index } => {
            format!("the fix loop did not converge; step {index} escalates to you. What now?")
        }
        Pause::GateReview { .. } => format!("{}. What now?", review_line(&pause)),
        Pause::Question { .. } => pause.question_text().unwrap_or_default(),
        Pause::ByHand => "the session is paused. What now?".into(),
    };
    let choices: Vec<(&'static str, &str)> = pause
        .choices()
        .iter()
        .map(|(c, what)| (c.as_str(), *what))
        .collect();
    let picked = bar.suspend(|| prompt::choose(&title, &choices));
    // No answer (end of input): the pause stays for `baton session answer`.
    let Some(choice) = picked.and_then(Choice::parse) else {
        return Ok(Some(Outcome::Waiting(Waiting::Paused(pause))));
    };
    intervene::decide(&setup.ctx, Some(&s.id), choice, "").map_err(|e| errors::failure(&e))?;
    if choice == Choice::Abort {
        return Ok(Some(Outcome::Abandoned));
    }
    Ok(None)
}

/// Ticks session `id` until it ends or waits for a person nobody here can be asked.
pub async fn ticks(
    setup: &Setup,
    id: &str,
    first_answer: Option<String>,
    cancel: CancellationToken,
    mut spent: Spent,
) -> Result<Ended, Failure> {
    if let Some(s) = load(setup, id) {
        crate::signals::set_next(crate::signals::Next {
            resume: super::report::continue_command(&s),
            answer: None,
        });
    }
    let bar = Progress::new();
    let on_event = |e: EngineEvent| bar.event(e);
    let lines = TickLines::new(setup, id);
    let mut next = match first_answer {
        Some(a) => Next::Answer(a),
        None => Next::Tick,
    };
    let mut ticks = 0;
    let outcome = loop {
        let Some(source) = setup.source() else {
            break Outcome::Failed {
                code: "MODEL_MISSING".into(),
                message: "no model and no recorded traces".into(),
            };
        };
        let mut after = |t: &Tick| {
            // The next step is another task run: its spinner line starts from nothing.
            bar.reset();
            if !setup.json {
                bar.suspend(|| lines.print(t));
            }
        };
        let mut settings = RunSettings::new(&setup.owner, &setup.store, source);
        settings.record = setup.record.as_deref();
        settings.tools = setup.tools.clone();
        settings.cancel = cancel.clone();
        settings.budget = setup.budget;
        settings.executor = setup.executor.as_ref();
        if let Some(n) = setup.max_turns {
            settings.max_turns = n;
        }
        if !setup.json {
            settings.on_event = Some(&on_event);
        }
        settings.after_tick = Some(&mut after);
        let result = match std::mem::replace(&mut next, Next::Tick) {
            Next::Tick => run::run(&setup.ctx, Some(id), settings).await,
            Next::Answer(text) => run::answer(&setup.ctx, Some(id), &text, settings).await,
        };
        let report: SessionReport = match result {
            Ok(r) => r,
            Err(e) => {
                bar.finish();
                return Err(errors::failure(&e));
            }
        };
        ticks += report.ticks;
        spent.model_calls += report.spent.model_calls;
        spent.usage.add(report.spent.usage);
        match report.end {
            SessionEnd::Completed => break Outcome::Completed,
            SessionEnd::Waiting {
                index, question, ..
            } => {
                if setup.interactive
                    && let Some(answer) = bar.suspend(|| {
                        prompt::text(&format!(
                            "step {index} asks:\n\n{}",
                            text::block(&question, 8000)
                        ))
                    })
                {
                    next = Next::Answer(answer);
                    continue;
                }
                break Outcome::Waiting(Waiting::Step { index, question });
            }
            SessionEnd::Paused => {
                let Some(s) = load(setup, id) else {
                    break Outcome::Failed {
                        code: "SESSION_UNREADABLE".into(),
                        message: format!("session {id} cannot be read after it paused"),
                    };
                };
                match settle_pause(setup, &bar, &s) {
                    Ok(None) => continue,
                    Ok(Some(o)) => break o,
                    Err(f) => {
                        bar.finish();
                        return Err(f);
                    }
                }
            }
            SessionEnd::Interrupted { code, .. } if code == ABORTED => break Outcome::Interrupted,
            SessionEnd::Interrupted { code, message } => {
                break Outcome::Failed {
                    code: code.to_string(),
                    message,
                };
            }
        }
    };
    bar.finish();
    Ok(Ended {
        outcome,
        session: load(setup, id),
        ticks,
        spent,
    })
}
