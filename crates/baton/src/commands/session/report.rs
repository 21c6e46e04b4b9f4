//! How a `baton session` command ended: the exit code, the final text for a person, the JSON
//! report for a script (`--json`).

use super::{status, text};
use crate::exit;
use baton_lifecycle::ralph::decisions;
use baton_lifecycle::ralph::session::Session;
use baton_lifecycle::session::build::ChainLine;
use baton_lifecycle::session::infer::Question;
use baton_lifecycle::session::intervene::Pause;
use baton_lifecycle::session::run::Spent;
use serde_json::{Value, json};

/// Decisions shown with a final report.
const DECISIONS: usize = 10;

/// Why the loop stopped for a person.
#[derive(Debug, Clone, PartialEq)]
pub enum Waiting {
    /// A step's task run asked something.
    Step { index: usize, question: String },
    /// The session is paused on a failed step, an escalation or a gate's verdict.
    Paused(Pause),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `start` needs answers before it can build the chain. `rerun` is the `baton session
    /// start …` command line that asks again.
    Questions {
        questions: Vec<Question>,
        rerun: String,
    },
    /// The chain waits for a yes (no terminal to ask, no `-y`): nothing was created.
    Confirm {
        chain: Vec<ChainLine>,
        rerun: String,
    },
    /// The person said no to the chain: nothing was created.
    Cancelled(Vec<ChainLine>),
    Completed,
    Waiting(Waiting),
    /// Paused on an error nobody is asked about (a failed step of an auto-mode session, a
    /// session paused by hand that was not continued).
    Paused(Pause),
    /// The model or its connection failed; the step stays claimed, `continue` retries it.
    Failed {
        code: String,
        message: String,
    },
    /// A person gave the session up at the terminal.
    Abandoned,
    /// Ctrl-C or SIGTERM.
    Interrupted,
}

/// The end of a command, with what the session looks like now.
pub struct Ended {
    pub outcome: Outcome,
    pub session: Option<Session>,
    pub ticks: usize,
    /// Model calls and tokens of this command (decomposition, step runs, gates).
    pub spent: Spent,
}

impl Outcome {
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Questions { .. } => "questions",
            Outcome::Confirm { .. } => "confirm",
            Outcome::Cancelled(_) => "cancelled",
            Outcome::Completed => "completed",
            Outcome::Waiting(_) => "waiting",
            Outcome::Paused(_) => "paused",
            Outcome::Failed { .. } => "failed",
            Outcome::Abandoned => "abandoned",
            Outcome::Interrupted => "interrupted",
        }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Completed | Outcome::Cancelled(_) => exit::OK,
            Outcome::Questions { .. } | Outcome::Confirm { .. } | Outcome::Waiting(_) => {
                exit::WAITING
            }
            Outcome::Failed { code, .. } if code == baton_engine::spend::BUDGET_EXCEEDED => {
                exit::BUDGET_EXCEEDED
            }
            Outcome::Paused(_) | Outcome::Failed { .. } | Outcome::Abandoned => exit::FAILURE,
            Outcome::Interrupted => exit::STOPPED,
        }
    }
}

pub fn question_json(q: &Question) -> Value {
    json!({
        "id": q.id,
        "text": q.text,
        "options": q.options.iter().map(|c| json!({
            "value": c.value, "label": c.label, "description": c.description,
        })).collect::<Vec<_>>(),
        "free_text": q.free_text,
    })
}

fn pause_json(p: &Pause) -> Value {
    let choices: Vec<&str> = p.choices().iter().map(|(c, _)| c.as_str()).collect();
    match p {
        Pause::FailedStep {
            index,
            label,
            reason,
        } => json!({
            "kind": "failed-step", "index": index, "step": label, "reason": reason,
            "choices": choices,
        }),
        Pause::Escalation { index } => {
            json!({"kind": "escalation", "index": index, "choices": choices})
        }
        Pause::GateReview {
            index,
            gate,
            verdict,
            reason,
            confidence,
        } => json!({
            "kind": "gate-review", "index": index, "gate": gate, "verdict": verdict,
            "reason": reason, "confidence": confidence, "choices": choices,
        }),
        Pause::Question {
            index,
            gate,
            question,
        } => json!({
            "kind": "question", "index": index, "gate": gate, "question": question,
            "text": p.question_text(), "choices": choices,
        }),
        Pause::ByHand => json!({"kind": "paused", "choices": choices}),
    }
}

pub fn to_json(e: &Ended) -> Value {
    let mut v = json!({
        "outcome": e.outcome.name(),
        "session_id": e.session.as_ref().map(|s| s.id.clone()),
        "ticks": e.ticks,
        "model_calls": e.spent.model_calls,
        "usage": e.spent.usage,
    });
    match &e.outcome {
        Outcome::Questions { questions, .. } => {
            v["questions"] = questions.iter().map(question_json).collect();
        }
        Outcome::Confirm { chain, .. } | Outcome::Cancelled(chain) => v["chain"] = json!(chain),
        Outcome::Waiting(Waiting::Step { index, question }) => {
            v["waiting"] = json!({"kind": "step-question", "index": index, "question": question});
        }
        Outcome::Waiting(Waiting::Paused(p)) | Outcome::Paused(p) => v["waiting"] = pause_json(p),
        Outcome::Failed { code, message } => {
            v["error"] = json!({"code": code, "message": message});
        }
        Outcome::Completed | Outcome::Interrupted | Outcome::Abandoned => {}
    }
    if let Some(s) = &e.session {
        let recent = decisions::read_last(&s.dir, DECISIONS).unwrap_or_default();
        v["session"] = status::json(s, &recent);
    }
    v
}

/// `--session ID` when the session is not the one commands pick by default anyway, and
/// `--project DIR` when the session is not in the current directory.
fn session_flag(e: &Ended) -> String {
    e.session.as_ref().map(flags).unwrap_or_default()
}

/// ` [--project DIR] --session ID` for session `s`.
fn flags(s: &Session) -> String {
    // <project>/.workflow/.maestro/<id>
    let project = s.dir.ancestors().nth(3);
    let here = std::env::current_dir()
        .ok()
        .and_then(|d| d.canonicalize().ok());
    let elsewhere = project.filter(|p| p.canonicalize().ok() != here);
    let mut out = String::new();
    if let Some(p) = elsewhere {
        out.push_str(&format!(
            " --project {}",
            text::shell_word(&p.display().to_string())
        ));
    }
    out.push_str(&format!(" --session {}", text::shell_word(&s.id)));
    out
}

/// `baton session continue …` for session `s`: what Ctrl-C names.
pub fn continue_command(s: &Session) -> String {
    format!("baton session continue{}", flags(s))
}

/// What a gate's pending verdict says, on one line (terminal prompt and final report).
pub fn review_line(pause: &Pause) -> String {
    let Pause::GateReview {
        index,
        gate,
        verdict,
        reason,
        confidence,
    } = pause
    else {
        return String::new();
    };
    format!(
        "gate {gate} (step {index}): the model says {verdict} (confidence {confidence}){}",
        if reason.is_empty() {
            String::new()
        } else {
            format!(": {}", text::line(reason, 300))
        }
    )
}

/// The final lines for a person: stdout for results, stderr for trouble.
pub fn print_text(e: &Ended) {
    let flag = session_flag(e);
    match &e.outcome {
        Outcome::Questions { questions, rerun } => {
            outln!("the session needs answers before its chain can be built:\n");
            for q in questions {
                outln!("  {}: {}", text::line(&q.id, 100), text::line(&q.text, 300));
                for c in &q.options {
                    outln!(
                        "      {} — {}",
                        text::line(&c.value, 100),
                        text::line(&c.label, 200)
                    );
                }
            }
            let example = questions.first().map_or("ID", |q| q.id.as_str());
            outln!("\nanswer on the command line: {rerun} --answer {example}=<answer> …");
        }
        Outcome::Confirm { chain, rerun } => {
            outln!("the session would run this chain:\n");
            for line in chain {
                let shown = baton_lifecycle::session::late_bound::shown(&line.line());
                outln!("  {}", text::line(&shown, 200));
            }
            outln!(
                "\nnothing was created; to create and run it without being asked, add -y: \
                 {rerun} -y"
            );
        }
        Outcome::Cancelled(_) => outln!("cancelled: nothing was created"),
        Outcome::Completed => {
            let id = e.session.as_ref().map_or("", |s| s.id.as_str());
            outln!(
                "completed: session {id} ({} ticks, {} model calls, {} tokens)",
                e.ticks,
                e.spent.model_calls,
                e.spent.usage.total_tokens
            );
        }
        Outcome::Waiting(Waiting::Step { index, question }) => {
            outln!("step {index} asks:\n\n{}\n", text::block(question, 8000));
            outln!("answer with: baton session answer{flag} \"<your answer>\"");
        }
        Outcome::Waiting(Waiting::Paused(p)) | Outcome::Paused(p) => {
            let what = match p {
                Pause::FailedStep {
                    index,
                    label,
                    reason,
                } => format!(
                    "step {index} ({}) failed{}",
                    text::line(label, 200),
                    reason
                        .as_deref()
                        .map(|r| format!(": {}", text::line(r, 300)))
                        .unwrap_or_default()
                ),
                Pause::Escalation { index } => format!(
                    "the fix loop did not converge: escalation at step {index} waits for a person"
                ),
                Pause::GateReview { .. } => {
                    format!("{}; it waits for a person", review_line(p))
                }
                Pause::Question { .. } => p.question_text().unwrap_or_default(),
                Pause::ByHand => "the session is paused".to_string(),
            };
            let choices: Vec<&str> = p.choices().iter().map(|(c, _)| c.as_str()).collect();
            eprintln!("paused: {}", crate::ui::visible(&what));
            eprintln!(
                "  decide with: baton session answer{flag} {}",
                choices.join("|")
            );
        }
        Outcome::Failed { code, message } => {
            eprintln!(
                "error[{}]: {}",
                text::line(code, 100),
                crate::ui::visible(message)
            );
            eprintln!("  the step is kept; try again with: baton session continue{flag}");
        }
        Outcome::Abandoned => eprintln!("abandoned: the session is given up (status failed)"),
        Outcome::Interrupted => {
            eprintln!(
                "{} continue with `baton session continue{flag}`",
                crate::ui::color::err(crate::ui::Paint::Warn, "stopped;")
            );
        }
    }
}

/// Prints the end of a command and returns its exit code.
pub fn finish(e: &Ended, json: bool) -> anyhow::Result<u8> {
    if json {
        crate::ui::print_json(&to_json(e))?;
    } else {
        print_text(e);
    }
    Ok(e.outcome.exit_code())
}
